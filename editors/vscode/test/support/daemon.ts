/**
 * Runs the real `tandem lsp` binary over stdio with vscode-jsonrpc (the
 * library under vscode-languageclient) and plugs the extension's own
 * modules into it: ChatSession sends prompts and folds updates into the
 * transcript, UserRequests answers permissions and questions, Review holds
 * `workspace/applyEdit` proposals. Only the VS Code editor is replaced, by
 * in-memory documents that send `didOpen`/`didChange` as VS Code would.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { createMessageConnection, StreamMessageReader, StreamMessageWriter, type MessageConnection } from 'vscode-jsonrpc/node';
import type { ApplyWorkspaceEditParams, ApplyWorkspaceEditResult, TextEdit } from 'vscode-languageserver-protocol';
import * as ext from '../../src/lsp_ext';
import { ChatSession } from '../../src/session';
import { UserRequests } from '../../src/requests';
import { Review } from '../../src/review';
import { applyTextEdits } from '../../src/review_edits';
import type { LocalEvent } from '../../src/chat/transcript';
import { fake, Uri } from '../fake_vscode';

export const REPO_ROOT = path.resolve(__dirname, '../../../..');

export function tandemBinary(): string {
  const fromEnv = process.env.TANDEM_BIN;
  const candidates = fromEnv ? [fromEnv] : [path.join(REPO_ROOT, 'target/debug/tandem'), path.join(REPO_ROOT, 'target/release/tandem')];
  const found = candidates.find((p) => fs.existsSync(p));
  if (!found) throw new Error(`no tandem binary (tried ${candidates.join(', ')}); run cargo build first`);
  return found;
}

export class Workspace {
  readonly root: string;
  readonly home: string;
  constructor() {
    const base = fs.mkdtempSync(path.join(os.tmpdir(), 'tandem-vscode-'));
    this.root = path.join(base, 'ws');
    this.home = path.join(base, 'home');
    fs.mkdirSync(this.root);
    fs.mkdirSync(this.home);
  }
  write(rel: string, text: string): string {
    const p = path.join(this.root, rel);
    fs.writeFileSync(p, text);
    return p;
  }
  read(rel: string): string {
    return fs.readFileSync(path.join(this.root, rel), 'utf8');
  }
}

/** An open document of the fake editor, synced like VS Code syncs it. */
export class Doc {
  version = 1;
  constructor(private readonly daemon: Daemon, readonly uri: string, public text: string) {}
  getText(): string {
    return this.text;
  }
  /** Edits the buffer (unsaved) and sends the incremental didChange. */
  edit(edits: TextEdit[]): void {
    this.text = applyTextEdits(this.text, edits);
    this.version++;
    void this.daemon.conn.sendNotification('textDocument/didChange', {
      textDocument: { uri: this.uri, version: this.version },
      contentChanges: [...edits].sort((a, b) => b.range.start.line - a.range.start.line || b.range.start.character - a.range.start.character)
        .map((e) => ({ range: e.range, text: e.newText })),
    });
  }
}

export class Daemon {
  readonly conn: MessageConnection;
  readonly chat: ChatSession;
  readonly requests: UserRequests;
  readonly review: Review;
  readonly local: LocalEvent[] = [];
  readonly docs: Doc[] = [];
  readonly stderr: string[] = [];
  /** What `workspace/applyEdit`'s "next" (VS Code applying the edit) does; the default applies everything. */
  applyFilter: (edits: TextEdit[]) => TextEdit[] = (e) => e;
  private localWaiters: (() => void)[] = [];

  private constructor(private readonly proc: ChildProcess, readonly ws: Workspace) {
    this.conn = createMessageConnection(new StreamMessageReader(proc.stdout!), new StreamMessageWriter(proc.stdin!));
    proc.stderr!.on('data', (d: Buffer) => this.stderr.push(d.toString()));
    const emit = (e: LocalEvent) => {
      this.chat.emit(e);
      this.local.push(e);
      for (const w of this.localWaiters.splice(0)) w();
    };
    this.chat = new ChatSession({ get: () => undefined, update: () => Promise.resolve(), keys: () => [] } as never);
    this.requests = new UserRequests(emit, () => true);
    this.review = new Review(emit);
    const client = {
      isRunning: () => true,
      sendRequest: this.conn.sendRequest.bind(this.conn),
      sendNotification: this.conn.sendNotification.bind(this.conn),
    };
    this.chat.ctx = { ensureClient: () => Promise.resolve(client), client, output: { warn: () => {} }, setModelName: () => {} } as never;
    this.conn.onNotification(ext.update, (p) => {
      if (p.update.sessionUpdate === 'turn_end') this.review.withdrawAll('the turn ended');
      this.chat.onUpdate(p);
    });
    this.conn.onRequest(ext.requestPermission, (p, token) => this.requests.requestPermission(p, token as never));
    this.conn.onRequest(ext.requestUserInput, (p, token) => this.requests.requestUserInput(p, token as never));
    this.conn.onRequest('workspace/applyEdit', (p: ApplyWorkspaceEditParams) => this.review.handleApplyEdit(p, (q) => this.applyEdit(q)));
    this.conn.onRequest('window/workDoneProgress/create', () => null);
    this.conn.onNotification('$/progress', () => {});
    this.conn.listen();
  }

  static async start(ws = new Workspace(), initializationOptions: Record<string, unknown> = {}): Promise<Daemon> {
    fake.reset();
    const proc = spawn(tandemBinary(), ['lsp'], {
      env: { ...process.env, TANDEM_HOME: ws.home, TANDEM_LOG: 'info', TANDEM_FSYNC: '0' },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const d = new Daemon(proc, ws);
    const rootUri = Uri.file(ws.root).toString();
    const result = (await d.conn.sendRequest('initialize', {
      processId: process.pid,
      rootUri,
      workspaceFolders: [{ uri: rootUri, name: 'ws' }],
      initializationOptions,
      capabilities: {
        general: { positionEncodings: ['utf-16'] },
        window: { workDoneProgress: true },
        workspace: {
          applyEdit: true,
          workspaceEdit: { documentChanges: true, resourceOperations: ['create', 'rename', 'delete'], changeAnnotationSupport: { groupsOnLabel: true } },
        },
        // The protocol tests answer no language requests (test/language.test.ts does).
        experimental: { tandem: { requestPermission: true, requestUserInput: true } },
      },
    })) as { capabilities: Record<string, unknown> };
    void d.conn.sendNotification('initialized', {});
    d.capabilities = result.capabilities;
    return d;
  }

  capabilities: Record<string, unknown> = {};

  open(rel: string, text: string): Doc {
    const uri = Uri.file(path.join(this.ws.root, rel)).toString();
    const doc = new Doc(this, uri, text);
    this.docs.push(doc);
    fake.documents.push({ uri: Uri.parse(uri), getText: () => doc.text, get version() { return doc.version; } });
    void this.conn.sendNotification('textDocument/didOpen', { textDocument: { uri, languageId: 'plaintext', version: doc.version, text } });
    return doc;
  }

  /** Waits for a local event (a card, a proposal) matching `pred`; fails after 20 s. */
  async waitForLocal<T extends LocalEvent>(pred: (e: LocalEvent) => e is T): Promise<T> {
    const deadline = Date.now() + 10_000;
    for (;;) {
      const found = this.local.find(pred);
      if (found) return found;
      if (Date.now() > deadline) throw new Error(`no such local event; got ${JSON.stringify(this.local.map((e) => e.local))}`);
      await new Promise<void>((r) => {
        this.localWaiters.push(r);
        setTimeout(r, 200);
      });
    }
  }

  /** VS Code applying an edit to its buffers: only open documents here, filtered by `applyFilter`. */
  private applyEdit(p: ApplyWorkspaceEditParams): ApplyWorkspaceEditResult {
    for (const c of p.edit.documentChanges ?? []) {
      if (!('textDocument' in c)) return { applied: false, failureReason: 'file operations are not supported by the test editor' };
      const doc = this.docs.find((d) => d.uri === c.textDocument.uri);
      if (!doc) return { applied: false, failureReason: `not open: ${c.textDocument.uri}` };
      if (c.textDocument.version !== null && c.textDocument.version !== doc.version) return { applied: false };
      const edits = this.applyFilter(c.edits as TextEdit[]);
      if (edits.length > 0) doc.edit(edits);
    }
    return { applied: true };
  }

  async stop(): Promise<number | null> {
    const exited = new Promise<number | null>((r) => this.proc.on('exit', (code) => r(code)));
    try {
      await this.conn.sendRequest('shutdown');
      void this.conn.sendNotification('exit');
    } catch {
      this.proc.kill();
    }
    const code = await exited;
    this.conn.dispose();
    return code;
  }
}
