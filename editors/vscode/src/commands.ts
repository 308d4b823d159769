/** One `(deps) => handler` factory per contributed command. */
import * as vscode from 'vscode';
import type { Ctx } from './ctx';
import * as ext from './lsp_ext';
import type { ChatSession } from './session';
import type { Review } from './review';
import { Review as ReviewClass } from './review';
import type { Tasks } from './tasks';
import { SECRET_API_KEY } from './config';
import { toggleFollow } from './follow';
import { forkSession } from './fork';

export interface Deps {
  ctx: Ctx;
  chat: ChatSession;
  review: Review;
  tasks: Tasks;
}

type Factory = (d: Deps) => (...args: unknown[]) => unknown;

function proposalOf(uri: unknown): string | undefined {
  const u = uri instanceof vscode.Uri ? uri : vscode.window.activeTextEditor?.document.uri;
  return u ? ReviewClass.toolCallIdOfUri(u) : undefined;
}

export const COMMANDS: Record<string, Factory> = {
  'tandem.openChat': () => () => vscode.commands.executeCommand('tandem.chat.focus'),
  'tandem.restart': ({ ctx }) => () => ctx.restart(),
  'tandem.showLog': ({ ctx }) => () => ctx.showLog(),
  'tandem.cancel': ({ chat }) => () => chat.cancel(),
  'tandem.newSession': ({ chat }) => () => chat.newSession(),
  'tandem.openSession': ({ ctx, chat }) => async () => {
    const client = await ctx.ensureClient();
    if (!client) return;
    const folder = vscode.workspace.workspaceFolders?.[0]?.uri.toString();
    const { sessions } = await client.sendRequest(ext.listSessions, folder ? { workspaceFolder: folder } : {});
    const pick = await vscode.window.showQuickPick(
      sessions.map((s) => ({
        label: s.title,
        description: new Date(s.updated).toLocaleString(),
        detail: `${s.workspace.join(', ')} · ${s.turnCount} turn${s.turnCount === 1 ? '' : 's'} · ${s.state}`,
        sessionId: s.sessionId,
      })),
      { title: 'tandem: Open Session', placeHolder: sessions.length ? 'Pick a session to reopen' : 'No sessions yet', matchOnDetail: true },
    );
    if (!pick) return;
    await vscode.commands.executeCommand('tandem.chat.focus');
    await chat.load(pick.sessionId);
  },
  'tandem.renameSession': ({ ctx, chat }) => async (title?: unknown) => {
    const client = await ctx.ensureClient();
    const sessionId = chat.sessionId;
    if (!client || !sessionId) {
      void vscode.window.showInformationMessage('tandem: no session to rename yet: send a prompt first.');
      return;
    }
    const current = chat.title ?? (await client.sendRequest(ext.listSessions, {})).sessions.find((s) => s.sessionId === sessionId)?.title;
    const name = typeof title === 'string' ? title : await vscode.window.showInputBox({
      title: 'tandem: Rename Session',
      prompt: 'The title the session lists show (Open Session…)',
      value: current ?? '',
      validateInput: (v) => (v.trim() ? undefined : 'A title cannot be empty'),
    });
    if (name === undefined) return;
    await client.sendRequest(ext.renameSession, { sessionId, title: name });
  },
  'tandem.forkSession': ({ ctx, chat }) => (messageId?: unknown) => forkSession(ctx, chat, messageId),
  'tandem.followAgent': () => () => toggleFollow(),
  'tandem.setMode': ({ chat }) => async (mode?: unknown) => {
    const m = typeof mode === 'string' ? mode : await vscode.window.showQuickPick([...ext.APPROVAL_MODES], { title: 'tandem: approval mode' });
    if (m && (ext.APPROVAL_MODES as readonly string[]).includes(m)) await chat.setMode(m as ext.ApprovalMode);
  },
  'tandem.editSelection': ({ tasks }) => () => tasks.runOnSelection('edit'),
  'tandem.explainSelection': ({ tasks }) => () => tasks.runOnSelection('explain'),
  'tandem.fixSelection': ({ tasks }) => () => tasks.runOnSelection('fix'),
  'tandem.runTask': ({ tasks }) => (args?: unknown) => tasks.run(args),
  'tandem.acceptProposal': ({ review }) => (uri?: unknown) => {
    const id = proposalOf(uri);
    if (id) return review.accept(id);
  },
  'tandem.rejectProposal': ({ review }) => (uri?: unknown) => {
    const id = proposalOf(uri);
    if (id) review.reject(id);
  },
  'tandem.mcpServers': ({ ctx, chat }) => async () => {
    const client = await ctx.ensureClient();
    if (!client) return;
    const sessionId = chat.sessionId;
    const { servers } = await client.sendRequest(ext.listMcpServers, sessionId ? { sessionId } : {});
    await vscode.window.showQuickPick(mcpServerItems(servers), {
      title: 'tandem: MCP Servers',
      placeHolder: servers.length ? 'The session\'s MCP servers and their tools' : 'No MCP servers (configure [mcp_servers.<name>] in config.toml)',
      matchOnDescription: true,
    });
  },
  'tandem.setApiKey': ({ ctx }) => async () => {
    const key = await vscode.window.showInputBox({
      title: 'tandem: API key',
      prompt: 'Stored in VS Code\'s secret storage and passed to the daemon in its environment (never in settings). Empty clears it.',
      password: true,
      ignoreFocusOut: true,
    });
    if (key === undefined) return;
    if (key === '') await ctx.extCtx.secrets.delete(SECRET_API_KEY);
    else await ctx.extCtx.secrets.store(SECRET_API_KEY, key);
    await ctx.restart();
  },
};

/** One item per server (its state, and its error when it failed), then its tools. */
export function mcpServerItems(servers: ext.McpServerInfo[]): vscode.QuickPickItem[] {
  return servers.flatMap((s) => [
    { label: s.name, kind: vscode.QuickPickItemKind.Separator },
    {
      label: `${s.state === 'ready' ? '$(check)' : s.state === 'failed' ? '$(error)' : '$(loading~spin)'} ${s.name}: ${s.state}`,
      detail: s.error,
      description: `${s.tools.length} tool${s.tools.length === 1 ? '' : 's'}`,
    },
    ...s.tools.map((t) => ({ label: `    ${t.name}`, description: t.readOnly ? 'read-only' : undefined, detail: t.description })),
  ]);
}
