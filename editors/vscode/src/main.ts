/** Entry point: wires the pieces together and registers the commands; holds no logic. */
import * as vscode from 'vscode';
import { Ctx } from './ctx';
import { ChatSession } from './session';
import { ChatView } from './chat/view';
import { Review, PROPOSED_SCHEME } from './review';
import { UserRequests } from './requests';
import { Tasks } from './tasks';
import { COMMANDS } from './commands';
import { restoreCheckpoint } from './rewind';
import { RESTART_SETTINGS } from './config';
import type { FromWebview } from './chat/messages';

let ctx: Ctx | undefined;

export function activate(extCtx: vscode.ExtensionContext): void {
  const chat = new ChatSession(extCtx.workspaceState);
  const emit = chat.emit.bind(chat);
  const review = new Review(emit);
  const view = new ChatView(
    extCtx.extensionUri,
    () => ({
      transcript: chat.transcript,
      model: vscode.workspace.getConfiguration('tandem').get<string>('model.name'),
      roots: (vscode.workspace.workspaceFolders ?? []).map((f) => f.uri.fsPath),
    }),
    (m) => void onWebviewMessage(m).catch((e: unknown) => {
      void vscode.window.showErrorMessage(`tandem: ${e instanceof Error ? e.message : String(e)}`);
    }),
  );
  const requests = new UserRequests(emit, () => view.visible);
  ctx = new Ctx(extCtx, review, requests, chat);
  chat.ctx = ctx;
  chat.view = view;
  const tasks = new Tasks(ctx, chat, review);

  async function onWebviewMessage(m: FromWebview): Promise<void> {
    switch (m.type) {
      case 'ready':
        if (await ctx!.ensureClient()) await chat.restore();
        break;
      case 'send':
        await chat.send(m.text, m.attach, m.images ?? []);
        break;
      case 'cancel':
        chat.cancel();
        break;
      case 'setMode':
        await chat.setMode(m.mode);
        break;
      case 'setModel':
        await chat.setModel(m.model, m.effort);
        break;
      case 'newSession':
        await chat.newSession();
        break;
      case 'openSession':
        await vscode.commands.executeCommand('tandem.openSession');
        break;
      case 'permission':
        requests.answerPermission(m.requestId, m.optionId);
        break;
      case 'answer':
        requests.answerQuestion(m.requestId, m.answers);
        break;
      case 'restoreCheckpoint':
        await restoreCheckpoint(chat, m.messageId);
        break;
      case 'fork':
        await vscode.commands.executeCommand('tandem.forkSession', m.messageId);
        break;
      case 'proposal':
        if (m.action === 'accept') await review.accept(m.toolCallId);
        else if (m.action === 'reject') review.reject(m.toolCallId);
        else if (m.action === 'preview') await review.preview(m.toolCallId);
        else await review.openDiff(m.toolCallId);
        break;
    }
  }

  const deps = { ctx, chat, review, tasks };
  extCtx.subscriptions.push(
    ctx,
    review,
    requests,
    view,
    vscode.window.registerWebviewViewProvider(ChatView.viewType, view, { webviewOptions: { retainContextWhenHidden: false } }),
    vscode.workspace.registerTextDocumentContentProvider(PROPOSED_SCHEME, review),
    ...Object.entries(COMMANDS).map(([name, factory]) => vscode.commands.registerCommand(name, factory(deps))),
    vscode.workspace.onDidChangeConfiguration((e) => {
      if (ctx?.client && RESTART_SETTINGS.some((s) => e.affectsConfiguration(`tandem.${s}`))) {
        void vscode.window.showInformationMessage('tandem settings changed.', 'Restart tandem').then((pick) => {
          if (pick) void ctx?.restart();
        });
      }
    }),
  );
}

export function deactivate(): Thenable<void> | undefined {
  return ctx?.stop();
}
