/**
 * Answers the daemon's requests to the user: `tandem/requestPermission` and
 * `tandem/requestUserInput`. Each is shown in the chat as a card; when the
 * chat view is not visible it is also asked natively (a modal message for a
 * permission, a QuickPick / InputBox per question), and the first answer
 * wins. Dismissing answers "cancelled"; a request the daemon withdraws
 * (`$/cancelRequest`) closes its card.
 */
import * as vscode from 'vscode';
import type {
  PermissionOptionId, Question, RequestPermissionParams, RequestPermissionResult,
  RequestUserInputParams, RequestUserInputResult,
} from './lsp_ext';
import type { LocalEvent } from './chat/transcript';

/** Pure: the daemon's answer for a chosen permission option (or a dismissal). */
export function permissionAnswer(choice: PermissionOptionId | 'cancelled' | undefined, reason?: string): RequestPermissionResult {
  if (choice === undefined || choice === 'cancelled') return { outcome: { outcome: 'cancelled' } };
  return { outcome: { outcome: 'selected', optionId: choice, ...(reason ? { reason } : {}) } };
}

/** Pure: the daemon's answer for the user's answers (null: dismissed). */
export function userInputAnswer(answers: Record<string, string> | null | undefined): RequestUserInputResult {
  if (!answers) return { outcome: 'cancelled' };
  return { answers };
}

/** Pure: a short human line for an answer, shown on the card once answered. */
export function describePermissionAnswer(r: RequestPermissionResult, params: RequestPermissionParams): string {
  if (r.outcome.outcome === 'cancelled') return 'dismissed';
  const id = r.outcome.optionId;
  return params.options.find((o) => o.optionId === id)?.name ?? id;
}

type Waiter<T> = (answer: T) => void;

export class UserRequests implements vscode.Disposable {
  private nextId = 1;
  private readonly permissionWaiters = new Map<string, Waiter<PermissionOptionId | 'cancelled'>>();
  private readonly questionWaiters = new Map<string, Waiter<Record<string, string> | null>>();

  constructor(
    private readonly emit: (e: LocalEvent) => void,
    private readonly chatVisible: () => boolean,
  ) {}

  dispose(): void {
    for (const w of this.permissionWaiters.values()) w('cancelled');
    for (const w of this.questionWaiters.values()) w(null);
  }

  async requestPermission(params: RequestPermissionParams, token: vscode.CancellationToken): Promise<RequestPermissionResult> {
    const requestId = `p${this.nextId++}`;
    const choice = await new Promise<PermissionOptionId | 'cancelled'>((resolve) => {
      let done = false;
      const finish = (c: PermissionOptionId | 'cancelled') => {
        if (done) return;
        done = true;
        this.permissionWaiters.delete(requestId);
        resolve(c);
      };
      this.permissionWaiters.set(requestId, finish);
      token.onCancellationRequested(() => finish('cancelled'));
      this.emit({
        local: 'permission', requestId, toolCallId: params.toolCall.toolCallId, title: params.toolCall.title, options: params.options,
      });
      if (!this.chatVisible()) {
        const names = params.options.map((o) => o.name);
        void vscode.window
          .showInformationMessage(`tandem asks: ${params.toolCall.title}`, { modal: true }, ...names)
          .then((picked) => finish(params.options.find((o) => o.name === picked)?.optionId ?? 'cancelled'));
      }
    });
    const answer = permissionAnswer(choice);
    this.emit({
      local: 'request_resolved', requestId,
      answer: token.isCancellationRequested ? 'withdrawn' : describePermissionAnswer(answer, params),
    });
    return answer;
  }

  async requestUserInput(params: RequestUserInputParams, token: vscode.CancellationToken): Promise<RequestUserInputResult> {
    const requestId = `q${this.nextId++}`;
    const answers = await new Promise<Record<string, string> | null>((resolve) => {
      let done = false;
      const finish = (a: Record<string, string> | null) => {
        if (done) return;
        done = true;
        this.questionWaiters.delete(requestId);
        resolve(a);
      };
      this.questionWaiters.set(requestId, finish);
      token.onCancellationRequested(() => finish(null));
      this.emit({ local: 'question', requestId, toolCallId: params.toolCallId, questions: params.questions });
      if (!this.chatVisible()) void askNatively(params.questions, token).then(finish);
    });
    this.emit({
      local: 'request_resolved', requestId,
      answer: token.isCancellationRequested ? 'withdrawn' : answers ? Object.values(answers).join(', ') : 'dismissed',
    });
    return userInputAnswer(answers);
  }

  /** An answer from the chat's card. */
  answerPermission(requestId: string, optionId: PermissionOptionId | 'cancelled'): void {
    this.permissionWaiters.get(requestId)?.(optionId);
  }

  answerQuestion(requestId: string, answers: Record<string, string> | null): void {
    this.questionWaiters.get(requestId)?.(answers);
  }
}

/** One QuickPick (options, free text allowed) or InputBox per question. */
async function askNatively(questions: Question[], token: vscode.CancellationToken): Promise<Record<string, string> | null> {
  const answers: Record<string, string> = {};
  for (const q of questions) {
    const a = q.options && q.options.length > 0 ? await pickWithFreeText(q, token) : await vscode.window.showInputBox({ title: 'tandem asks', prompt: q.question, ignoreFocusOut: true }, token);
    if (a === undefined) return null;
    answers[q.id] = a;
  }
  return answers;
}

function pickWithFreeText(q: Question, token: vscode.CancellationToken): Promise<string | undefined> {
  return new Promise((resolve) => {
    const qp = vscode.window.createQuickPick();
    qp.title = `tandem asks: ${q.question}`;
    qp.placeholder = 'Pick an answer or type your own';
    qp.ignoreFocusOut = true;
    const base = (q.options ?? []).map((o) => ({ label: o.label, description: o.description }));
    qp.items = base;
    qp.onDidChangeValue((v) => {
      qp.items = v && !base.some((b) => b.label === v) ? [...base, { label: v, description: '(your answer)' }] : base;
    });
    let answered: string | undefined;
    qp.onDidAccept(() => {
      answered = qp.selectedItems[0]?.label ?? (qp.value || undefined);
      qp.hide();
    });
    qp.onDidHide(() => {
      qp.dispose();
      resolve(answered);
    });
    token.onCancellationRequested(() => qp.hide());
    qp.show();
  });
}
