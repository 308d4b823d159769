/**
 * A small stand-in for the `vscode` module, enough for the extension's
 * logic to run in plain Node: the unit and protocol tests bundle the
 * extension's modules with `vscode` aliased here. Tests steer it through
 * `fake` (what the user picks in a dialog, which documents are open).
 */
type Listener<T> = (e: T) => void;

export class EventEmitter<T> {
  private listeners: Listener<T>[] = [];
  event = (l: Listener<T>) => {
    this.listeners.push(l);
    return { dispose: () => (this.listeners = this.listeners.filter((x) => x !== l)) };
  };
  fire(e: T): void {
    for (const l of [...this.listeners]) l(e);
  }
  dispose(): void {
    this.listeners = [];
  }
}

export class CancellationTokenSource {
  private emitter = new EventEmitter<void>();
  token = {
    isCancellationRequested: false,
    onCancellationRequested: this.emitter.event,
  };
  cancel(): void {
    if (this.token.isCancellationRequested) return;
    this.token.isCancellationRequested = true;
    this.emitter.fire();
  }
  dispose(): void {}
}

export class Uri {
  private constructor(readonly scheme: string, readonly path: string, readonly query: string) {}
  static parse(s: string): Uri {
    const u = new URL(s);
    return new Uri(u.protocol.replace(/:$/, ''), decodeURIComponent(u.pathname), u.search.replace(/^\?/, ''));
  }
  static file(p: string): Uri {
    return new Uri('file', p, '');
  }
  get fsPath(): string {
    return this.path;
  }
  with(change: { scheme?: string; query?: string }): Uri {
    return new Uri(change.scheme ?? this.scheme, this.path, change.query ?? this.query);
  }
  toString(): string {
    return `${this.scheme}://${encodeURI(this.path)}${this.query ? `?${this.query}` : ''}`;
  }
}

export interface FakeDocument { uri: Uri; getText(): string; version: number }

/** What the fake UI answers, set by each test. */
export const fake = {
  /** The label a modal message "clicks", or undefined for dismissing it. */
  messageAnswer: undefined as string | undefined,
  messages: [] as string[],
  documents: [] as FakeDocument[],
  executed: [] as { command: string; args: unknown[] }[],
  reset(): void {
    this.messageAnswer = undefined;
    this.messages = [];
    this.documents = [];
    this.executed = [];
  },
};

function message(text: string, ...rest: unknown[]): Promise<string | undefined> {
  fake.messages.push(text);
  const items = rest.filter((r) => typeof r === 'string') as string[];
  return Promise.resolve(items.includes(fake.messageAnswer ?? '') ? fake.messageAnswer : undefined);
}

export const window = {
  showInformationMessage: message,
  showErrorMessage: message,
  showWarningMessage: message,
  showInputBox: () => Promise.resolve(undefined),
  createQuickPick: () => {
    throw new Error('the fake has no QuickPick');
  },
  activeTextEditor: undefined,
  tabGroups: { all: [] as { tabs: unknown[] }[], close: () => Promise.resolve(true) },
};

export const workspace = {
  get textDocuments(): FakeDocument[] {
    return fake.documents;
  },
  asRelativePath: (u: Uri) => u.path,
  openTextDocument: (u: Uri) => {
    const d = fake.documents.find((x) => x.uri.toString() === u.toString());
    return d ? Promise.resolve(d) : Promise.reject(new Error(`no document ${u.toString()}`));
  },
  getConfiguration: () => ({ get: () => undefined, inspect: () => undefined }),
};

export const commands = {
  executeCommand: (command: string, ...args: unknown[]) => {
    fake.executed.push({ command, args });
    return Promise.resolve(undefined);
  },
};

export class TabInputTextDiff {
  constructor(readonly original: Uri, readonly modified: Uri) {}
}

export class Position {
  constructor(readonly line: number, readonly character: number) {}
}

/** No language extension here: no diagnostics, and no change ever. */
export const languages = {
  getDiagnostics: (): never[] => [],
  onDidChangeDiagnostics: new EventEmitter<{ uris: Uri[] }>().event,
};
