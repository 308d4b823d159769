/**
 * The chat's view state and the reducer that folds `tandem/update`s (and the
 * extension's own local events: requests waiting for the user, proposals)
 * into it. It has no VS Code or DOM dependency: the extension host keeps one
 * copy (to hand a fresh webview a snapshot), the webview keeps another (to
 * render), and the unit tests run it in plain Node.
 *
 * `apply` mutates the transcript in place (streams of thousands of chunks a
 * second must not copy it) and bumps the `rev` of every item it touches, so
 * a renderer redraws exactly the items whose `rev` changed. A transcript is
 * plain JSON, so it goes through `postMessage` and `setState` as it is.
 */
import type {
  ApprovalMode, ContentBlock, ModelState, PermissionOption, PlanEntry, Question, SessionUpdate, ToolCallDiff, Usage,
} from '../lsp_ext';
import { applyModelUpdate, applyUsageContext } from './models';

/** `rewound`: a conversation rewind took it out of the model's context (greyed out). */
export type Item = { rewound?: boolean } & (
  | { kind: 'user'; rev: number; turnId?: string; messageId?: string; text: string; attachments: string[] }
  | { kind: 'agent'; rev: number; turnId?: string; text: string }
  | { kind: 'thought'; rev: number; turnId?: string; text: string }
  | {
      kind: 'tool';
      rev: number;
      turnId?: string;
      toolCallId: string;
      title: string;
      toolKind: string;
      status: string;
      waitingFor?: string;
      output: string;
      result?: string;
      diffs: ToolCallDiff[];
      proposal?: ProposalState;
    }
  | { kind: 'plan'; rev: number; turnId?: string; entries: PlanEntry[] }
  | { kind: 'notice'; rev: number; turnId?: string; text: string }
  | { kind: 'turn_end'; rev: number; turnId?: string; stopReason: string; message?: string; usage: Usage }
  | { kind: 'permission'; rev: number; requestId: string; title: string; options: PermissionOption[]; answer?: string }
  | { kind: 'question'; rev: number; requestId: string; questions: Question[]; answer?: string }
);

/** A `workspace/applyEdit` waiting in the chat for Accept / Reject. */
export interface ProposalState { id: string; label: string; files: string[]; outcome?: string }

export interface Transcript {
  sessionId?: string;
  items: Item[];
  /** toolCallId -> index in `items`. */
  tools: Record<string, number>;
  /** requestId -> index in `items` of a permission or question card. */
  requests: Record<string, number>;
  running: boolean;
  mode?: ApprovalMode;
  lastUsage?: Usage;
  /** The model in force and the models to switch to (`./models`). */
  models?: ModelState;
  /** Tokens in the model's context after the last call, and its window. */
  context?: { used: number; size: number };
  /** The session's cost so far, when known. */
  sessionCost?: number;
  /** The last call's tokens. */
  lastCall?: Usage;
  /** Index of the current plan item, updated in place. */
  planIndex?: number;
  /** Bumped on every change; a renderer compares it to skip idle frames. */
  rev: number;
  /** Set when items were removed (a reset): the renderer then rebuilds from this index. */
  truncatedFrom?: number;
}

/** Events that come from the extension, not the daemon. */
export type LocalEvent =
  | { local: 'session'; sessionId: string; mode?: ApprovalMode; models?: ModelState }
  | { local: 'models'; models: ModelState }
  | { local: 'prompt_sent'; text: string; attachments: string[] }
  | { local: 'turn_running'; running: boolean }
  | { local: 'permission'; requestId: string; toolCallId: string; title: string; options: PermissionOption[] }
  | { local: 'question'; requestId: string; toolCallId: string; questions: Question[] }
  | { local: 'request_resolved'; requestId: string; answer: string }
  | { local: 'proposal'; toolCallId: string; proposal: ProposalState }
  | { local: 'proposal_resolved'; toolCallId: string; outcome: string }
  | { local: 'notice'; text: string };

export interface UpdateEvent { sessionId: string; turnId?: string; update: SessionUpdate }
export type TranscriptEvent = UpdateEvent | LocalEvent;

export function emptyTranscript(sessionId?: string): Transcript {
  return { sessionId, items: [], tools: {}, requests: {}, running: false, rev: 0 };
}

function push(t: Transcript, item: Item): number {
  item.rev = ++t.rev;
  t.items.push(item);
  return t.items.length - 1;
}

function touch(t: Transcript, item: Item): void {
  item.rev = ++t.rev;
}

function textOf(blocks: ContentBlock[]): { text: string; attachments: string[] } {
  const texts: string[] = [];
  const attachments: string[] = [];
  for (const b of blocks) {
    if (b.type === 'text') texts.push(b.text);
    else if (b.type === 'resource') attachments.push(b.resource.uri);
    else if (b.type === 'image') attachments.push(`image (${b.mimeType.replace(/^image\//, '')})`);
    else attachments.push(b.uri);
  }
  return { text: texts.join('\n\n'), attachments };
}

/** Appends a streamed chunk to the trailing item of `kind`, or opens one. */
function appendChunk(t: Transcript, kind: 'agent' | 'thought', turnId: string | undefined, text: string): void {
  const last = t.items[t.items.length - 1];
  if (last && last.kind === kind && last.turnId === turnId) {
    last.text += text;
    touch(t, last);
  } else {
    push(t, { kind, rev: 0, turnId, text });
  }
}

/** Removes trailing items from `from` on, keeping the indexes consistent. */
function truncate(t: Transcript, from: number): void {
  if (from >= t.items.length) return;
  t.items.length = from;
  for (const [id, i] of Object.entries(t.tools)) if (i >= from) delete t.tools[id];
  for (const [id, i] of Object.entries(t.requests)) if (i >= from) delete t.requests[id];
  if (t.planIndex !== undefined && t.planIndex >= from) t.planIndex = undefined;
  t.truncatedFrom = Math.min(t.truncatedFrom ?? from, from);
  t.rev++;
}

function toolUpdate(t: Transcript, u: Extract<SessionUpdate, { sessionUpdate: 'tool_call_update' }>): void {
  const i = t.tools[u.toolCallId];
  const item = i === undefined ? undefined : t.items[i];
  if (!item || item.kind !== 'tool') return;
  if (u.status) {
    item.status = u.status;
    if (u.status !== 'pending') item.waitingFor = undefined;
  }
  if (u.waitingFor) item.waitingFor = u.waitingFor;
  if (u.outputDelta) item.output += u.outputDelta;
  for (const c of u.content ?? []) {
    if (c.type === 'diff') {
      const at = item.diffs.findIndex((d) => d.path === c.path);
      if (at >= 0) item.diffs[at] = c;
      else item.diffs.push(c);
    } else if (c.content.type === 'text') {
      item.result = c.content.text;
    }
  }
  touch(t, item);
}

function applyUpdate(t: Transcript, e: UpdateEvent): void {
  const u = e.update;
  const turnId = e.turnId;
  switch (u.sessionUpdate) {
    case 'user_message': {
      const { text, attachments } = textOf(u.content);
      // The prompt the user just sent was shown at once; the daemon's echo
      // confirms it rather than repeating it.
      const last = t.items[t.items.length - 1];
      if (last && last.kind === 'user' && last.turnId === undefined && last.text === text) {
        last.turnId = turnId;
        last.messageId = u.messageId;
        touch(t, last);
      } else {
        push(t, { kind: 'user', rev: 0, turnId, messageId: u.messageId, text, attachments });
      }
      t.running = true;
      break;
    }
    case 'agent_message_chunk':
      appendChunk(t, 'agent', turnId, u.content.text);
      t.running = true;
      break;
    case 'agent_thought_chunk':
      appendChunk(t, 'thought', turnId, u.content.text);
      t.running = true;
      break;
    case 'agent_message_reset': {
      let from = t.items.length;
      while (from > 0) {
        const prev = t.items[from - 1];
        if ((prev.kind === 'agent' || prev.kind === 'thought') && prev.turnId === turnId) from--;
        else break;
      }
      truncate(t, from);
      break;
    }
    case 'tool_call': {
      const existing = t.tools[u.toolCallId];
      const item: Item = {
        kind: 'tool', rev: 0, turnId, toolCallId: u.toolCallId, title: u.title, toolKind: u.kind,
        status: u.status, output: '', diffs: [],
      };
      if (existing !== undefined) {
        item.rev = ++t.rev;
        t.items[existing] = item;
      } else {
        t.tools[u.toolCallId] = push(t, item);
      }
      break;
    }
    case 'tool_call_update':
      toolUpdate(t, u);
      break;
    case 'plan': {
      const current = t.planIndex === undefined ? undefined : t.items[t.planIndex];
      if (current && current.kind === 'plan' && current.turnId === turnId) {
        current.entries = u.entries;
        touch(t, current);
      } else {
        t.planIndex = push(t, { kind: 'plan', rev: 0, turnId, entries: u.entries });
      }
      break;
    }
    case 'context_compacted':
      push(t, {
        kind: 'notice', rev: 0, turnId,
        text: u.summarized
          ? `Summarized ${u.removedMessages} older messages to fit the context window`
          : `Dropped ${u.removedMessages} older messages to fit the context window`,
      });
      break;
    case 'current_mode_update':
      t.mode = u.currentModeId;
      t.rev++;
      break;
    case 'usage':
      t.lastUsage = u.turn;
      applyUsageContext(t, u);
      t.rev++;
      break;
    case 'current_model_update':
      applyModelUpdate(t, u);
      t.rev++;
      break;
    case 'turn_end':
      push(t, { kind: 'turn_end', rev: 0, turnId, stopReason: u.stopReason, message: u.message, usage: u.usage });
      t.running = false;
      t.planIndex = undefined;
      break;
    case 'rewound': {
      if (!u.conversation) break;
      // A redo: each message it brought back, and what answered it, up to
      // the next user message that is not back.
      const back = new Set(u.restoredMessageIds ?? []);
      let restoring = false;
      for (const item of t.items) {
        if (item.kind === 'user') restoring = item.messageId !== undefined && back.has(item.messageId);
        if (restoring && item.rewound) {
          item.rewound = undefined;
          touch(t, item);
        }
      }
      // From the first dropped user message on, everything shown is out of
      // the model's context now (the rewind comes after all of it).
      if (u.droppedMessageIds.length === 0) break;
      const first = u.droppedMessageIds[0] ?? u.toMessageId;
      const from = t.items.findIndex((i) => i.kind === 'user' && i.messageId === first);
      if (from < 0) break;
      for (const item of t.items.slice(from)) {
        if (item.kind === 'permission' || item.kind === 'question' || item.rewound) continue;
        item.rewound = true;
        touch(t, item);
      }
      break;
    }
    case 'input_status':
      if (u.status === 'discarded' && u.reason) {
        push(t, { kind: 'notice', rev: 0, turnId, text: `Discarded: ${u.reason}` });
      }
      break;
  }
}

function applyLocal(t: Transcript, e: LocalEvent): void {
  switch (e.local) {
    case 'session':
      if (t.sessionId !== e.sessionId) {
        truncate(t, 0);
        t.tools = {};
        t.requests = {};
        t.running = false;
        t.mode = undefined;
        t.lastUsage = undefined;
        t.context = undefined;
        t.sessionCost = undefined;
        t.lastCall = undefined;
        t.models = undefined;
      }
      t.sessionId = e.sessionId;
      // newSession and loadSession answer with the mode and model in force.
      if (e.mode) t.mode = e.mode;
      if (e.models) t.models = e.models;
      t.rev++;
      break;
    case 'models':
      t.models = e.models;
      t.rev++;
      break;
    case 'prompt_sent':
      push(t, { kind: 'user', rev: 0, text: e.text, attachments: e.attachments });
      t.running = true;
      break;
    case 'turn_running':
      t.running = e.running;
      t.rev++;
      break;
    case 'permission':
      t.requests[e.requestId] = push(t, {
        kind: 'permission', rev: 0, requestId: e.requestId, title: e.title, options: e.options,
      });
      break;
    case 'question':
      t.requests[e.requestId] = push(t, { kind: 'question', rev: 0, requestId: e.requestId, questions: e.questions });
      break;
    case 'request_resolved': {
      const i = t.requests[e.requestId];
      const item = i === undefined ? undefined : t.items[i];
      if (item && (item.kind === 'permission' || item.kind === 'question')) {
        item.answer = e.answer;
        touch(t, item);
      }
      break;
    }
    case 'proposal':
    case 'proposal_resolved': {
      if (e.local === 'proposal' && t.tools[e.toolCallId] === undefined) {
        // A task's inline edit has no tool call: it gets a card of its own.
        t.tools[e.toolCallId] = push(t, {
          kind: 'tool', rev: 0, toolCallId: e.toolCallId, title: e.proposal.label, toolKind: 'edit',
          status: 'pending', waitingFor: 'permission', output: '', diffs: [],
        });
      }
      const i = t.tools[e.toolCallId];
      const item = i === undefined ? undefined : t.items[i];
      if (!item || item.kind !== 'tool') break;
      if (e.local === 'proposal') item.proposal = e.proposal;
      else if (item.proposal) {
        item.proposal.outcome = e.outcome;
        if (item.status === 'pending') {
          item.status = 'completed';
          item.waitingFor = undefined;
        }
      }
      touch(t, item);
      break;
    }
    case 'notice':
      push(t, { kind: 'notice', rev: 0, text: e.text });
      break;
  }
}

/** Folds one event into the transcript. Updates of another session are ignored. */
export function apply(t: Transcript, e: TranscriptEvent): void {
  if ('local' in e) {
    applyLocal(t, e);
    return;
  }
  if (t.sessionId !== undefined && e.sessionId !== t.sessionId) return;
  applyUpdate(t, e);
}

export function applyAll(t: Transcript, events: readonly TranscriptEvent[]): void {
  for (const e of events) apply(t, e);
}

/** `1,234 in · 56 out · $0.0012`: a turn's usage in words. */
export function formatUsage(u: Usage): string {
  const parts = [`${u.inputTokens.toLocaleString('en-US')} in`, `${u.outputTokens.toLocaleString('en-US')} out`];
  if (u.cachedTokens > 0) parts.push(`${u.cachedTokens.toLocaleString('en-US')} cached`);
  if (u.costUsd !== undefined) parts.push(`$${u.costUsd.toFixed(4)}`);
  return parts.join(' · ');
}
