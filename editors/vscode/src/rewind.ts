/**
 * "Restore checkpoint" on a user message of the chat: a dry run of
 * `tandem/rewind` shows the files it would restore and the conflicts (files
 * the user changed since, left alone) in a QuickPick, whose choice rewinds
 * the files, the conversation, or both. When files the user changed since
 * are in the way, their diffs open beside the editor and a second QuickPick
 * asks which of them to overwrite (`force` for those paths); none ticked
 * leaves them alone.
 */
import * as vscode from 'vscode';
import * as ext from './lsp_ext';
import type { ChatSession } from './session';

interface Choice extends vscode.QuickPickItem { files: boolean; conversation: boolean }
interface Conflict extends vscode.QuickPickItem { path: string }

/** One line per file: its path relative to its folder and what happens to it. */
export function describeFiles(files: ext.RewindFile[]): string {
  if (files.length === 0) return 'No file changed since this message.';
  return files
    .map((f) => `${vscode.workspace.asRelativePath(f.path)}: ${f.status}${f.reason ? ` (${f.reason})` : ''}`)
    .join(' · ');
}

/**
 * The conflicts' diffs in a document beside the editor, then the files to
 * overwrite anyway; `undefined` when the user closed the picker (nothing is
 * rewound then).
 */
export async function pickForced(conflicts: ext.RewindFile[]): Promise<string[] | undefined> {
  const text = conflicts.map((f) => f.diff ?? `${f.path}: ${f.reason ?? 'changed since'}\n`).join('\n');
  const doc = await vscode.workspace.openTextDocument({ content: text, language: 'diff' });
  await vscode.window.showTextDocument(doc, { viewColumn: vscode.ViewColumn.Beside, preview: true, preserveFocus: true });
  const items: Conflict[] = conflicts.map((f) => ({
    label: vscode.workspace.asRelativePath(f.path),
    description: 'changed since the agent left it',
    path: f.path,
  }));
  const picked = await vscode.window.showQuickPick(items, {
    title: 'tandem: Overwrite the files you changed since?',
    placeHolder: 'Tick the files to overwrite (their diffs are beside); none ticked leaves them alone',
    canPickMany: true,
    ignoreFocusOut: true,
  });
  return picked?.map((p) => p.path);
}

export async function restoreCheckpoint(chat: ChatSession, messageId: string): Promise<void> {
  const sessionId = chat.sessionId;
  const client = await chat.ctx.ensureClient();
  if (!sessionId || !client) {
    void vscode.window.showInformationMessage('tandem is not running');
    return;
  }
  const dry = await client.sendRequest(ext.rewind, { sessionId, toMessageId: messageId, files: true, conversation: true, dryRun: true });
  const files = describeFiles(dry.files);
  const conflicts = dry.files.filter((f) => f.status === 'conflict').length;
  const choices: Choice[] = [
    { label: 'Files and conversation', description: 'restore the files and continue from before this message', detail: files, files: true, conversation: true },
    { label: 'Files only', detail: files, files: true, conversation: false },
    { label: 'Conversation only', description: 'the files stay as they are', files: false, conversation: true },
  ];
  const pick = await vscode.window.showQuickPick(choices, {
    title: 'tandem: Restore checkpoint',
    placeHolder: conflicts > 0
      ? `${conflicts} file(s) you changed since will be left alone`
      : 'Rewind what?',
    matchOnDetail: true,
  });
  if (!pick) return;
  let force: string[] | undefined;
  const inTheWay = dry.files.filter((f) => f.status === 'conflict');
  if (pick.files && inTheWay.length > 0) {
    force = await pickForced(inTheWay);
    if (!force) return;
  }
  const done = await client.sendRequest(ext.rewind, {
    sessionId, toMessageId: messageId, files: pick.files, conversation: pick.conversation,
    ...(force && force.length > 0 ? { force } : {}),
  });
  const restored = done.files.filter((f) => f.status === 'restored').length;
  const left = done.files.filter((f) => f.status === 'conflict' || f.status === 'unrestorable' || f.status === 'failed');
  const parts = [`restored ${restored} file(s)`];
  if (pick.conversation) parts.push('the conversation continues from before that message');
  chat.emit({ local: 'notice', text: `Rewound (${done.rewindId ?? ''}): ${parts.join('; ')}.` });
  if (left.length > 0) {
    void vscode.window.showWarningMessage(`tandem: not restored: ${describeFiles(left)}`);
  } else {
    void vscode.window.showInformationMessage(`tandem: ${parts.join('; ')}`);
  }
}
