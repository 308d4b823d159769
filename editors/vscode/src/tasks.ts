/**
 * Keybinding tasks (issue 11): the daemon offers them as code actions (the
 * lightbulb, through the language client), and they run through
 * `workspace/executeCommand tandem.runTask`, which answers at once with the
 * task's session; the chat then shows that session. Inline edits
 * (`edit`, `document`) open their proposal as a diff to accept or reject.
 */
import * as vscode from 'vscode';
import { ExecuteCommandRequest } from 'vscode-languageclient/node';
import * as ext from './lsp_ext';
import type { Ctx } from './ctx';
import type { ChatSession } from './session';
import type { Review } from './review';
import { isRunTaskArgs, SELECTION_EDIT_TASKS, taskChoices, type ConfiguredTask } from './task_choices';

export class Tasks {
  constructor(private readonly ctx: Ctx, private readonly chat: ChatSession, private readonly review: Review) {}

  /** `tandem.runTask`: from a code action (with its arguments) or a key (QuickPick). */
  async run(args?: unknown): Promise<void> {
    if (isRunTaskArgs(args)) return this.execute(args);
    const configured = vscode.workspace.getConfiguration('tandem').get<Record<string, ConfiguredTask>>('tasks');
    const pick = await vscode.window.showQuickPick(
      taskChoices(configured).map((t) => ({ label: t.title, description: t.id, id: t.id })),
      { title: 'tandem: Run task', placeHolder: 'Pick a task for the selection' },
    );
    if (pick) await this.runOnSelection(pick.id);
  }

  async runOnSelection(task: string): Promise<void> {
    const editor = vscode.window.activeTextEditor;
    if (!editor) {
      void vscode.window.showInformationMessage('tandem: open a file and select some code first');
      return;
    }
    let instruction: string | undefined;
    if (task === 'edit') {
      // Asked here, natively, rather than by the daemon's question.
      instruction = await vscode.window.showInputBox({
        title: 'tandem: Edit selection',
        prompt: 'What should change in the selection?',
        placeHolder: 'e.g. rename x to count and add a doc comment',
        ignoreFocusOut: true,
      });
      if (!instruction) return;
    }
    const client = await this.ctx.ensureClient();
    if (!client) return;
    const doc = editor.document;
    const sel = editor.selection;
    const range = new vscode.Range(sel.start, sel.end);
    const diagnostics = vscode.languages.getDiagnostics(doc.uri).filter((d) => d.range.intersection(range) !== undefined);
    await this.execute({
      task,
      uri: doc.uri.toString(),
      range: client.code2ProtocolConverter.asRange(range),
      version: doc.version,
      diagnostics: await client.code2ProtocolConverter.asDiagnostics(diagnostics),
      ...(instruction ? { instruction } : {}),
    });
  }

  private async execute(args: ext.RunTaskArgs): Promise<void> {
    const client = await this.ctx.ensureClient();
    if (!client) return;
    if (SELECTION_EDIT_TASKS.has(args.task)) this.review.autoDiff = true;
    try {
      const r = (await client.sendRequest(ExecuteCommandRequest.type, {
        command: ext.RUN_TASK_COMMAND,
        arguments: [args],
      })) as ext.StartedTaskResult | null;
      if (r?.sessionId) {
        this.chat.switchTo(r.sessionId);
        if (!SELECTION_EDIT_TASKS.has(args.task)) await vscode.commands.executeCommand('tandem.chat.focus');
      }
    } catch (e) {
      this.review.autoDiff = false;
      void vscode.window.showErrorMessage(`tandem: the task failed to start: ${e instanceof Error ? e.message : String(e)}`);
    }
  }
}
