/**
 * The chat's session: which tandem session the chat shows, sending prompts
 * (or steering while a turn runs), cancel, mode, switching sessions. It folds
 * every event into the extension-side transcript and forwards it to the
 * webview. The current session id is kept in the workspace state, so a
 * window reload reopens it (replayed with `tandem/loadSession`).
 */
import * as vscode from 'vscode';
import type { Ctx, UpdateSink } from './ctx';
import * as ext from './lsp_ext';
import { apply, emptyTranscript, type LocalEvent, type Transcript, type TranscriptEvent } from './chat/transcript';
import type { ChatView } from './chat/view';
import type { Attach, PromptImage } from './chat/messages';
import { follow } from './follow';

const SESSION_KEY = 'tandem.sessionId';
/** Updates kept per session the chat does not show, to replay when it switches there. */
const BACKLOG_CAP = 5000;

export class ChatSession implements UpdateSink {
  transcript: Transcript = emptyTranscript();
  view: ChatView | undefined;
  ctx!: Ctx;
  private readonly backlog = new Map<string, ext.UpdateParams[]>();
  private restored = false;
  /** Each session's title, from its `session_info` updates. */
  private readonly titles = new Map<string, string>();
  /** Sessions being loaded: their replayed updates are not followed. */
  private readonly replaying = new Set<string>();

  constructor(private readonly state: vscode.Memento) {}

  get sessionId(): string | undefined {
    return this.transcript.sessionId;
  }

  /** The chat session's title, once the daemon named it. */
  get title(): string | undefined {
    return this.sessionId ? this.titles.get(this.sessionId) : undefined;
  }

  emit(e: LocalEvent): void {
    this.fold(e);
  }

  private fold(e: TranscriptEvent): void {
    apply(this.transcript, e);
    this.view?.push([e]);
  }

  onUpdate(p: ext.UpdateParams): void {
    if (!this.replaying.has(p.sessionId)) void follow(p).catch(() => undefined);
    if (p.update.sessionUpdate === 'session_info') this.titles.set(p.sessionId, p.update.title);
    if (p.sessionId === this.transcript.sessionId) {
      this.fold(p);
      if (p.update.sessionUpdate === 'current_model_update') this.ctx.setModelName(p.update.name);
      return;
    }
    const list = this.backlog.get(p.sessionId) ?? [];
    list.push(p);
    if (list.length > BACKLOG_CAP) list.splice(0, list.length - BACKLOG_CAP);
    this.backlog.set(p.sessionId, list);
  }

  onClientChanged(running: boolean): void {
    if (!running) {
      this.restored = false;
      if (this.transcript.running) this.fold({ local: 'turn_running', running: false });
    }
  }

  /** Shows `sessionId` in the chat, with what arrived for it meanwhile. */
  switchTo(sessionId: string, replay = true, mode?: ext.ApprovalMode, models?: ext.ModelState): void {
    this.fold({ local: 'session', sessionId, mode, models });
    this.showModel(models);
    void this.state.update(SESSION_KEY, sessionId);
    if (replay) for (const p of this.backlog.get(sessionId) ?? []) apply(this.transcript, p);
    this.backlog.delete(sessionId);
    this.view?.resync();
  }

  /** On the first use after a (re)start: reopen the session of the last window. */
  async restore(): Promise<void> {
    if (this.restored) return;
    this.restored = true;
    const id = this.state.get<string>(SESSION_KEY);
    if (!id || this.transcript.sessionId === id) return;
    try {
      await this.load(id);
    } catch (e) {
      this.ctx.output.warn(`tandem: could not reopen session ${id}: ${String(e)}`);
      void this.state.update(SESSION_KEY, undefined);
    }
  }

  async load(sessionId: string): Promise<void> {
    const client = await this.ctx.ensureClient();
    if (!client) return;
    this.backlog.delete(sessionId);
    // Replayed updates arrive before the answer and are folded as they come.
    this.switchTo(sessionId, false);
    this.replaying.add(sessionId);
    const loaded = await client.sendRequest(ext.loadSession, { sessionId }).finally(() => this.replaying.delete(sessionId));
    if (this.transcript.sessionId === sessionId) {
      this.fold({ local: 'session', sessionId, mode: loaded.mode, models: modelState(loaded) });
      this.showModel(modelState(loaded));
    }
  }

  async newSession(title?: string): Promise<string | undefined> {
    const client = await this.ctx.ensureClient();
    if (!client) return undefined;
    const created = await client.sendRequest(ext.newSession, title ? { title } : {});
    const { sessionId, mode } = created;
    this.switchTo(sessionId, true, mode, modelState(created));
    return sessionId;
  }

  async send(text: string, attach: Attach[], pasted: PromptImage[] = []): Promise<void> {
    const client = await this.ctx.ensureClient();
    if (!client) return;
    await this.restore();
    const blocks = attachments(attach);
    const images = imageBlocks(pasted);
    const title = text.split('\n')[0].slice(0, 80) || (images.length > 0 ? 'image' : '');
    const sessionId = this.transcript.sessionId ?? (await this.newSession(title));
    if (!sessionId) return;
    const promptBlocks: ext.ContentBlock[] = [{ type: 'text', text }, ...images, ...blocks];
    const shown = [...pasted.map((i) => `image (${i.mimeType.replace(/^image\//, '')})`), ...blocks.map(uriOf)];
    if (this.transcript.running) {
      // Typing while a turn runs steers it.
      this.fold({ local: 'prompt_sent', text, attachments: shown });
      await client.sendRequest(ext.steer, { sessionId, prompt: promptBlocks });
      return;
    }
    this.fold({ local: 'prompt_sent', text, attachments: shown });
    try {
      const r = await client.sendRequest(ext.prompt, { sessionId, prompt: promptBlocks });
      if (r.stopReason === 'error' && r.message) void vscode.window.showErrorMessage(`tandem: ${r.message}`);
    } catch (e) {
      this.fold({ local: 'notice', text: `The prompt failed: ${e instanceof Error ? e.message : String(e)}` });
      this.fold({ local: 'turn_running', running: false });
    }
  }

  /** The status bar names the model in force. */
  private showModel(state: ext.ModelState | undefined): void {
    if (state) this.ctx.setModelName(state.models.find((m) => m.id === state.model)?.name);
  }

  cancel(): void {
    const sessionId = this.transcript.sessionId;
    if (!sessionId || !this.ctx.client?.isRunning()) {
      void vscode.window.showInformationMessage('tandem: nothing is running');
      return;
    }
    void this.ctx.client.sendNotification(ext.cancel, { sessionId, keepInbox: false });
  }

  async setMode(mode: ext.ApprovalMode): Promise<void> {
    const client = await this.ctx.ensureClient();
    if (!client) return;
    const sessionId = this.transcript.sessionId ?? (await this.newSession());
    if (!sessionId) return;
    await client.sendRequest(ext.setMode, { sessionId, mode });
  }

  /** `tandem/setModel`; an unknown model or effort is shown, nothing changes. */
  async setModel(model: string, effort?: string): Promise<void> {
    const client = await this.ctx.ensureClient();
    if (!client) return;
    const sessionId = this.transcript.sessionId ?? (await this.newSession());
    if (!sessionId) return;
    try {
      const models = await client.sendRequest(ext.setModel, { sessionId, model, effort });
      if (this.transcript.sessionId === sessionId) {
        this.fold({ local: 'models', models });
        this.showModel(models);
      }
    } catch (e) {
      void vscode.window.showErrorMessage(`tandem: ${e instanceof Error ? e.message : String(e)}`);
      // The pickers go back to what is in force.
      this.view?.resync();
    }
  }
}

/** The model picker's state of a newSession or loadSession answer. */
function modelState(r: ext.ModelState): ext.ModelState | undefined {
  return r.model ? { model: r.model, effort: r.effort, models: r.models ?? [] } : undefined;
}

function uriOf(b: ext.ContentBlock): string {
  return b.type === 'resource' ? b.resource.uri : b.type === 'resource_link' ? b.uri : '';
}

/** Pasted or dropped images as `image` blocks. */
export function imageBlocks(images: PromptImage[]): ext.ContentBlock[] {
  return images.map(({ mimeType, data }) => ({ type: 'image', mimeType, data }));
}

/** The active editor's selection or file as `resource` blocks (unsaved text included). */
export function attachments(attach: Attach[]): ext.ContentBlock[] {
  const editor = vscode.window.activeTextEditor;
  if (!editor) return [];
  const out: ext.ContentBlock[] = [];
  const doc = editor.document;
  if (attach.includes('selection') && !editor.selection.isEmpty) {
    const s = editor.selection;
    out.push({
      type: 'resource',
      resource: { uri: `${doc.uri.toString()}#L${s.start.line + 1}-${s.end.line + 1}`, text: doc.getText(s) },
    });
  } else if (attach.includes('file') || attach.includes('selection')) {
    out.push({ type: 'resource', resource: { uri: doc.uri.toString(), text: doc.getText() } });
  }
  return out;
}
