/**
 * "Fork from here" on a user message of the chat, and the "Fork Session…"
 * command: `tandem/forkSession` makes a new session whose history is the
 * chat's up to (not including) that message, and the chat opens it (its
 * history replayed by `tandem/loadSession`). The original is untouched
 * and stays in Open Session….
 */
import * as vscode from 'vscode';
import type { Ctx } from './ctx';
import * as ext from './lsp_ext';
import type { ChatSession } from './session';

interface Point extends vscode.QuickPickItem { messageId?: string }

/** The chat's user messages as fork points, then the whole session. */
function forkPoints(chat: ChatSession): Point[] {
  const points: Point[] = [];
  for (const item of chat.transcript.items) {
    if (item.kind === 'user' && item.messageId) {
      points.push({ label: item.text.split('\n')[0] || '(image)', description: `before ${item.messageId}`, messageId: item.messageId });
    }
  }
  points.push({ label: 'The whole session', description: 'every message so far' });
  return points;
}

/** Forks the chat's session before `messageId` (asked for when not given). */
export async function forkSession(ctx: Ctx, chat: ChatSession, messageId?: unknown): Promise<void> {
  const client = await ctx.ensureClient();
  const sessionId = chat.sessionId;
  if (!client || !sessionId) {
    void vscode.window.showInformationMessage('tandem: no session to fork yet: send a prompt first.');
    return;
  }
  let at = typeof messageId === 'string' ? messageId : undefined;
  if (at === undefined) {
    const pick = await vscode.window.showQuickPick(forkPoints(chat), {
      title: 'tandem: Fork Session',
      placeHolder: 'Fork before which message? (the fork has the history before it)',
    });
    if (!pick) return;
    at = pick.messageId;
  }
  try {
    const fork = await client.sendRequest(ext.forkSession, at ? { sessionId, messageId: at } : { sessionId });
    await vscode.commands.executeCommand('tandem.chat.focus');
    await chat.load(fork.sessionId);
    chat.emit({ local: 'notice', text: at ? `Forked before ${at}: this is a new session; the original is unchanged.` : 'Forked: this is a new session; the original is unchanged.' });
  } catch (e) {
    void vscode.window.showErrorMessage(`tandem: the fork failed: ${e instanceof Error ? e.message : String(e)}`);
  }
}
