/**
 * Review of agent patches. The daemon's `workspace/applyEdit` (through the
 * language client's `handleApplyEdit` middleware) becomes a pending
 * proposal: the chat's tool card offers Accept / Reject / Preview / Open
 * diff, and the diff editor's title offers Accept / Reject. Every path lands
 * the edit through `workspace.applyEdit` (into the buffers, with undo, the
 * file left unsaved) and answers the daemon with what really happened.
 * Edits that need no confirmation (auto mode) go straight through.
 */
import * as vscode from 'vscode';
import type { ApplyWorkspaceEditParams, ApplyWorkspaceEditResult } from 'vscode-languageserver-protocol';
import {
  applyTextEdits, editsFor, filesOf, needsConfirmation, proposalOf, withoutConfirmation,
} from './review_edits';
import type { LocalEvent } from './chat/transcript';

export const PROPOSED_SCHEME = 'tandem-proposed';

type Next = (params: ApplyWorkspaceEditParams) => Thenable<ApplyWorkspaceEditResult> | ApplyWorkspaceEditResult;

interface Pending {
  toolCallId: string;
  kind: 'patch' | 'task';
  params: ApplyWorkspaceEditParams;
  next: Next;
  resolve: (r: ApplyWorkspaceEditResult) => void;
}

export class Review implements vscode.TextDocumentContentProvider, vscode.Disposable {
  private readonly pending = new Map<string, Pending>();
  private readonly changed = new vscode.EventEmitter<vscode.Uri>();
  readonly onDidChange = this.changed.event;
  /** Open the diff at once for the next proposal (set by inline-edit tasks). */
  autoDiff = false;

  constructor(private readonly emit: (e: LocalEvent) => void) {}

  dispose(): void {
    this.withdrawAll('the editor closed', true);
    this.changed.dispose();
  }

  /** The language client's `workspace.handleApplyEdit` middleware. */
  async handleApplyEdit(params: ApplyWorkspaceEditParams, next: Next): Promise<ApplyWorkspaceEditResult> {
    const proposal = proposalOf(params);
    if (!needsConfirmation(params) || proposal === undefined) return next(params);
    const toolCallId = proposal.id;
    const result = new Promise<ApplyWorkspaceEditResult>((resolve) => {
      this.pending.set(toolCallId, { toolCallId, kind: proposal.kind, params, next, resolve });
    });
    this.emit({
      local: 'proposal',
      toolCallId,
      proposal: { id: toolCallId, label: params.label ?? 'Proposed edit', files: filesOf(params).map(displayPath) },
    });
    if (this.autoDiff) {
      this.autoDiff = false;
      void this.openDiff(toolCallId);
    }
    return result;
  }

  has(toolCallId: string): boolean {
    return this.pending.has(toolCallId);
  }

  /** Applies the whole proposal to the buffers. */
  async accept(toolCallId: string): Promise<void> {
    const p = this.pending.get(toolCallId);
    if (!p) return;
    const r = await p.next(withoutConfirmation(p.params));
    this.settle(toolCallId, r.applied ? r : {
      applied: false,
      failureReason: r.failureReason ?? 'the edit could not be applied (the file changed since the patch was proposed)',
    }, r.applied ? 'accepted' : 'failed');
  }

  reject(toolCallId: string, reason?: string): void {
    this.settle(toolCallId, { applied: false, failureReason: reason ?? 'rejected by the user' }, 'rejected');
  }

  /**
   * VS Code's refactor preview, where the user ticks changes per file and per
   * hunk. `applied` is true only if a buffer really changed: Apply with
   * nothing ticked reports success but applies nothing.
   */
  async preview(toolCallId: string): Promise<void> {
    const p = this.pending.get(toolCallId);
    if (!p) return;
    const before = snapshot(filesOf(p.params));
    const r = await p.next(p.params);
    const changed = filesOf(p.params).some((uri) => snapshot([uri]).get(uri) !== before.get(uri));
    if (r.applied && changed) this.settle(toolCallId, { applied: true }, 'reviewed');
    else this.settle(toolCallId, { applied: false, failureReason: 'the user applied none of the changes in the preview' }, 'rejected');
  }

  /** Opens `vscode.diff` of current vs. proposed text, one editor per file. */
  async openDiff(toolCallId: string): Promise<void> {
    const p = this.pending.get(toolCallId);
    if (!p) return;
    for (const uri of filesOf(p.params)) {
      const left = vscode.Uri.parse(uri);
      const right = left.with({ scheme: PROPOSED_SCHEME, query: `toolCallId=${encodeURIComponent(toolCallId)}&uri=${encodeURIComponent(uri)}` });
      await vscode.commands.executeCommand('vscode.diff', left, right, `${displayPath(uri)} ↔ tandem's proposal`, { preview: false });
    }
  }

  /** The proposal a `tandem-proposed:` document belongs to. */
  static toolCallIdOfUri(uri: vscode.Uri): string | undefined {
    return new URLSearchParams(uri.query).get('toolCallId') ?? undefined;
  }

  async provideTextDocumentContent(uri: vscode.Uri): Promise<string> {
    const q = new URLSearchParams(uri.query);
    const p = this.pending.get(q.get('toolCallId') ?? '');
    const target = q.get('uri') ?? '';
    if (!p) return '(this proposal was already answered)';
    let current = '';
    try {
      current = (await vscode.workspace.openTextDocument(vscode.Uri.parse(target))).getText();
    } catch {
      // A file the patch creates: the proposal is its whole text.
    }
    return applyTextEdits(current, editsFor(p.params, target));
  }

  /**
   * The daemon gave up on the agent's patches (their turn ended or was
   * cancelled). A task's inline edit is proposed after its turn, so it stays
   * unless `all` (the daemon stopped).
   */
  withdrawAll(reason: string, all = false): void {
    for (const [id, p] of [...this.pending]) {
      if (all || p.kind === 'patch') this.settle(id, { applied: false, failureReason: reason }, 'withdrawn');
    }
  }

  private settle(toolCallId: string, result: ApplyWorkspaceEditResult, outcome: string): void {
    const p = this.pending.get(toolCallId);
    if (!p) return;
    this.pending.delete(toolCallId);
    p.resolve(result);
    this.emit({ local: 'proposal_resolved', toolCallId, outcome });
    for (const uri of filesOf(p.params)) {
      this.changed.fire(vscode.Uri.parse(uri).with({ scheme: PROPOSED_SCHEME }));
    }
    void closeDiffsOf(toolCallId);
  }
}

function snapshot(uris: string[]): Map<string, string | undefined> {
  const m = new Map<string, string | undefined>();
  for (const uri of uris) m.set(uri, vscode.workspace.textDocuments.find((d) => d.uri.toString() === uri)?.getText());
  return m;
}

async function closeDiffsOf(toolCallId: string): Promise<void> {
  const tabs = vscode.window.tabGroups.all.flatMap((g) => g.tabs).filter((t) => {
    const input = t.input;
    return input instanceof vscode.TabInputTextDiff && input.modified.scheme === PROPOSED_SCHEME
      && Review.toolCallIdOfUri(input.modified) === toolCallId;
  });
  if (tabs.length > 0) await vscode.window.tabGroups.close(tabs);
}

function displayPath(uri: string): string {
  try {
    return vscode.workspace.asRelativePath(vscode.Uri.parse(uri));
  } catch {
    return uri;
  }
}
