/**
 * The chat webview's script. It keeps its own copy of the transcript (the
 * same reducer as the extension), folds incoming events at once, and redraws
 * at most once per animation frame, only the items whose `rev` changed. The
 * transcript survives the view being hidden through getState/setState.
 */
import MarkdownIt from 'markdown-it';
import { apply, emptyTranscript, formatUsage, type Item, type Transcript } from '../src/chat/transcript';
import { contextMeter, currentEfforts } from '../src/chat/models';
import type { FromWebview, ToWebview, Attach, PromptImage } from '../src/chat/messages';
import { imageFiles, imageLabel, readImage } from './images';
import { APPROVAL_MODES, describeStopReason, type ApprovalMode, type PermissionOptionId } from '../src/lsp_ext';

interface VsCodeApi {
  postMessage(m: FromWebview): void;
  getState(): unknown;
  setState(s: unknown): void;
}
declare function acquireVsCodeApi(): VsCodeApi;

const vscode = acquireVsCodeApi();
// Raw HTML in the model's markdown is shown as text, never as markup.
const md = new MarkdownIt({ html: false, linkify: true, breaks: false });

let transcript: Transcript = (vscode.getState() as { transcript?: Transcript } | undefined)?.transcript ?? emptyTranscript();
let model: string | undefined;
let roots: string[] = [];

/** A path as the user knows it: relative to its workspace folder. */
function displayPath(p: string): string {
  for (const r of roots) if (p.startsWith(`${r}/`)) return p.slice(r.length + 1);
  return p;
}
const nodes: HTMLElement[] = [];
const renderedRev: number[] = [];
let frameRequested = false;
let lastRenderedRev = -1;
let saveTimer: number | undefined;

/** Counters for the benchmark and the tests. */
const stats = { frames: 0, itemRenders: 0 };
(window as unknown as { tandemChatStats: typeof stats }).tandemChatStats = stats;

function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Record<string, string> = {}, ...children: (Node | string)[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === 'class') el.className = v;
    else el.setAttribute(k, v);
  }
  for (const c of children) el.append(c);
  return el;
}

function button(label: string, onClick: () => void, cls = ''): HTMLButtonElement {
  const b = h('button', { class: cls, type: 'button' }, label);
  b.addEventListener('click', onClick);
  return b;
}

// ---- layout ----------------------------------------------------------------

const app = document.getElementById('app')!;
const log = h('div', { class: 'log', role: 'log', 'aria-live': 'polite' });
const empty = h('div', { class: 'empty' }, 'Ask tandem about your code. Enter sends, Shift+Enter makes a new line.');
const status = h('div', { class: 'status' });
const input = h('textarea', { class: 'prompt', rows: '3', placeholder: 'Ask tandem… (Enter to send)', 'aria-label': 'Prompt' });
const stopButton = button('Stop', () => vscode.postMessage({ type: 'cancel' }), 'stop');
const sendButton = button('Send', () => send(), 'send');
const modeSelect = h('select', { class: 'mode', 'aria-label': 'Approval mode', title: 'Approval mode' });
modeSelect.append(h('option', { value: '', disabled: '', selected: '' }, 'mode…'));
for (const m of APPROVAL_MODES) modeSelect.append(h('option', { value: m }, m));
modeSelect.addEventListener('change', () => vscode.postMessage({ type: 'setMode', mode: modeSelect.value as ApprovalMode }));
// The model and effort pickers and the context meter (filled once a
// session names its models; `renderModelBar`).
const modelSelect = h('select', { class: 'model', 'aria-label': 'Model', title: 'Model' });
const effortSelect = h('select', { class: 'effort', 'aria-label': 'Reasoning effort', title: 'Reasoning effort' });
modelSelect.addEventListener('change', () => vscode.postMessage({ type: 'setModel', model: modelSelect.value }));
effortSelect.addEventListener('change', () =>
  vscode.postMessage({ type: 'setModel', model: modelSelect.value, effort: effortSelect.value }));
const meterFill = h('div', { class: 'meter-fill' });
const meterText = h('span', { class: 'meter-text' });
const meter = h('div', { class: 'meter', role: 'meter', 'aria-label': 'Context used' }, h('div', { class: 'meter-bar' }, meterFill), meterText);
const attachSelection = h('input', { type: 'checkbox', id: 'attach-selection' });
const attachFile = h('input', { type: 'checkbox', id: 'attach-file' });
const toolbar = h('div', { class: 'toolbar' },
  button('New', () => vscode.postMessage({ type: 'newSession' }), 'secondary'),
  button('Sessions…', () => vscode.postMessage({ type: 'openSession' }), 'secondary'),
  modeSelect,
);
// The header's second row: the context meter, then the model and effort.
const modelBar = h('div', { class: 'model-bar' }, meter, modelSelect, effortSelect);

/** The name the model in force is sent as (the settings' model before a session). */
function currentModelName(): string | undefined {
  const state = transcript.models;
  return state?.models.find((m) => m.id === state.model)?.name ?? model;
}

/** The pickers and the meter from the transcript's model and context. */
function renderModelBar(): void {
  const state = transcript.models;
  modelSelect.hidden = !state || state.models.length === 0;
  if (state) {
    const ids = state.models.map((m) => m.id).join('\n');
    if (modelSelect.dataset.ids !== ids) {
      modelSelect.replaceChildren(...state.models.map((m) => h('option', { value: m.id, title: m.name }, m.id)));
      modelSelect.dataset.ids = ids;
    }
    modelSelect.value = state.model;
  }
  // What the daemon says is in force (the select shows the user's pick at once).
  modelSelect.dataset.current = state?.model ?? '';
  effortSelect.dataset.current = state?.effort ?? '';
  const efforts = currentEfforts(transcript);
  effortSelect.hidden = efforts.length === 0;
  if (effortSelect.dataset.efforts !== efforts.join('\n')) {
    effortSelect.replaceChildren(...efforts.map((e) => h('option', { value: e }, e)));
    effortSelect.dataset.efforts = efforts.join('\n');
  }
  if (state?.effort) effortSelect.value = state.effort;
  const m = contextMeter(transcript);
  meter.hidden = !m;
  modelBar.hidden = !m && modelSelect.hidden;
  if (m) {
    meterText.textContent = m.text;
    meterFill.style.width = `${Math.round(m.ratio * 100)}%`;
    meter.title = m.tooltip;
    meter.setAttribute('aria-valuenow', String(Math.round(m.ratio * 100)));
  }
}
const attachRow = h('div', { class: 'attach' },
  h('label', {}, attachSelection, ' selection'), h('label', {}, attachFile, ' file'),
);
// Images pasted or dropped into the prompt, sent with it.
let pendingImages: PromptImage[] = [];
const imageChips = h('div', { class: 'images' });
const composer = h('div', { class: 'composer' }, input, imageChips, h('div', { class: 'actions' }, attachRow, stopButton, sendButton));
app.append(toolbar, modelBar, log, empty, status, composer);

input.addEventListener('keydown', (e) => {
  if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
    e.preventDefault();
    send();
  }
});

function send(): void {
  const text = input.value.trim();
  if (!text && pendingImages.length === 0) return;
  const attach: Attach[] = [];
  if (attachSelection.checked) attach.push('selection');
  if (attachFile.checked) attach.push('file');
  vscode.postMessage({ type: 'send', text, attach, images: pendingImages });
  input.value = '';
  pendingImages = [];
  renderImageChips();
}

function renderImageChips(): void {
  imageChips.replaceChildren(...pendingImages.map((image, i) =>
    h('span', { class: 'image-chip' }, `🖼 ${imageLabel(image)} `,
      button('×', () => {
        pendingImages.splice(i, 1);
        renderImageChips();
      }, 'secondary remove-image'))));
}

async function addImages(files: File[]): Promise<void> {
  for (const file of files) pendingImages.push(await readImage(file));
  renderImageChips();
}

input.addEventListener('paste', (e) => {
  const files = imageFiles(e.clipboardData);
  if (files.length === 0) return;
  e.preventDefault();
  void addImages(files);
});
composer.addEventListener('dragover', (e) => {
  if (imageFiles(e.dataTransfer).length > 0 || e.dataTransfer?.types.includes('Files')) e.preventDefault();
});
composer.addEventListener('drop', (e) => {
  const files = imageFiles(e.dataTransfer);
  if (files.length === 0) return;
  e.preventDefault();
  void addImages(files);
});

// ---- items -----------------------------------------------------------------

function renderItem(item: Item): HTMLElement {
  switch (item.kind) {
    case 'user': {
      const el = h('div', { class: 'item user' }, h('div', { class: 'who' }, 'You'), h('div', { class: 'text' }, item.text));
      for (const a of item.attachments) el.append(h('div', { class: 'attachment' }, `📎 ${decodeURIComponent(a.split('/').pop() ?? a)}`));
      const messageId = item.messageId;
      if (messageId) {
        el.append(
          button('Restore checkpoint', () => vscode.postMessage({ type: 'restoreCheckpoint', messageId }), 'secondary restore'),
          button('Fork from here', () => vscode.postMessage({ type: 'fork', messageId }), 'secondary fork'),
        );
      }
      return el;
    }
    case 'agent': {
      const body = h('div', { class: 'markdown' });
      body.innerHTML = md.render(item.text);
      return h('div', { class: 'item agent' }, body);
    }
    case 'thought': {
      const d = h('details', { class: 'item thought' }, h('summary', {}, 'Thinking'), h('div', { class: 'text' }, item.text));
      return d;
    }
    case 'tool':
      return renderTool(item);
    case 'plan': {
      const list = h('ul', { class: 'plan' });
      for (const e of item.entries) {
        const mark = e.status === 'completed' ? '☑' : e.status === 'in_progress' ? '▶' : '☐';
        list.append(h('li', { class: `plan-${e.status}` }, `${mark} ${e.content}`));
      }
      return h('div', { class: 'item plan-card' }, h('div', { class: 'who' }, 'Plan'), list);
    }
    case 'notice':
      return h('div', { class: 'item notice' }, item.text);
    case 'turn_end': {
      const words = describeStopReason(item.stopReason);
      const el = h('div', { class: `item turn-end stop-${item.stopReason}` }, h('span', { class: 'stop' }, words));
      if (item.message) el.append(h('span', { class: 'stop-message' }, ` — ${item.message}`));
      el.append(h('span', { class: 'usage' }, formatUsage(item.usage)));
      return el;
    }
    case 'permission':
      return renderPermission(item);
    case 'question':
      return renderQuestion(item);
  }
}

function renderTool(item: Extract<Item, { kind: 'tool' }>): HTMLElement {
  const badge = item.waitingFor ? 'waiting for you' : item.status.replace('_', ' ');
  const el = h('div', { class: `item tool status-${item.status}`, 'data-tool-call-id': item.toolCallId },
    h('div', { class: 'tool-head' }, h('span', { class: 'tool-title' }, item.title), h('span', { class: 'badge' }, badge)));
  if (item.output) el.append(h('pre', { class: 'output' }, item.output));
  if (item.diffs.length > 0) {
    const files = h('ul', { class: 'diffs' });
    for (const d of item.diffs) files.append(h('li', { title: d.path }, `${d.oldText === undefined ? 'add' : d.newText === '' ? 'delete' : 'update'} ${displayPath(d.path)}`));
    el.append(files);
  }
  const p = item.proposal;
  if (p && !p.outcome) {
    const act = (action: 'accept' | 'reject' | 'preview' | 'diff') => () =>
      vscode.postMessage({ type: 'proposal', toolCallId: item.toolCallId, action });
    el.append(h('div', { class: 'proposal' },
      button('Accept', act('accept'), 'accept'),
      button('Reject', act('reject'), 'reject secondary'),
      button('Review…', act('preview'), 'secondary'),
      button('Open diff', act('diff'), 'secondary')));
  } else if (p?.outcome) {
    el.append(h('div', { class: 'proposal-outcome' }, `Proposal ${p.outcome}`));
  }
  if (item.result && (item.status === 'completed' || item.status === 'failed')) {
    el.append(h('details', { class: 'result' }, h('summary', {}, 'Result'), h('pre', {}, item.result)));
  }
  return el;
}

function renderPermission(item: Extract<Item, { kind: 'permission' }>): HTMLElement {
  const el = h('div', { class: 'item permission' }, h('div', { class: 'who' }, 'tandem asks'), h('div', { class: 'text' }, item.title));
  if (item.answer) {
    el.append(h('div', { class: 'answered' }, `Answered: ${item.answer}`));
    return el;
  }
  const row = h('div', { class: 'options' });
  for (const o of item.options) {
    const cls = o.kind.startsWith('allow') ? 'allow' : 'reject secondary';
    row.append(button(o.name, () => vscode.postMessage({ type: 'permission', requestId: item.requestId, optionId: o.optionId as PermissionOptionId }), cls));
  }
  row.append(button('Dismiss', () => vscode.postMessage({ type: 'permission', requestId: item.requestId, optionId: 'cancelled' }), 'secondary'));
  el.append(row);
  return el;
}

function renderQuestion(item: Extract<Item, { kind: 'question' }>): HTMLElement {
  const el = h('div', { class: 'item question' }, h('div', { class: 'who' }, 'tandem asks'));
  if (item.answer) {
    for (const q of item.questions) el.append(h('div', { class: 'text' }, q.question));
    el.append(h('div', { class: 'answered' }, `Answered: ${item.answer}`));
    return el;
  }
  const fields: Record<string, HTMLInputElement> = {};
  for (const q of item.questions) {
    const field = h('input', { type: 'text', class: 'answer', 'aria-label': q.question, placeholder: 'Your answer' });
    fields[q.id] = field;
    const opts = h('div', { class: 'options' });
    for (const o of q.options ?? []) {
      const b = button(o.label, () => {
        field.value = o.label;
      }, 'secondary');
      if (o.description) b.title = o.description;
      opts.append(b);
    }
    el.append(h('div', { class: 'text' }, q.question), opts, field);
  }
  const submit = () => {
    const answers: Record<string, string> = {};
    for (const [id, f] of Object.entries(fields)) answers[id] = f.value;
    vscode.postMessage({ type: 'answer', requestId: item.requestId, answers });
  };
  for (const f of Object.values(fields)) f.addEventListener('keydown', (e) => { if (e.key === 'Enter') submit(); });
  el.append(h('div', { class: 'options' },
    button('Answer', submit),
    button('Dismiss', () => vscode.postMessage({ type: 'answer', requestId: item.requestId, answers: null }), 'secondary')));
  return el;
}

// ---- rendering ---------------------------------------------------------------

function scheduleRender(): void {
  if (frameRequested) return;
  frameRequested = true;
  requestAnimationFrame(render);
}

function render(): void {
  frameRequested = false;
  if (transcript.rev === lastRenderedRev && transcript.truncatedFrom === undefined) return;
  stats.frames++;
  const atBottom = log.scrollHeight - log.scrollTop - log.clientHeight < 40;
  const from = transcript.truncatedFrom;
  if (from !== undefined) {
    for (let i = nodes.length - 1; i >= from; i--) nodes[i].remove();
    nodes.length = Math.min(nodes.length, from);
    renderedRev.length = nodes.length;
    transcript.truncatedFrom = undefined;
  }
  const fragment = document.createDocumentFragment();
  for (let i = 0; i < transcript.items.length; i++) {
    const item = transcript.items[i];
    if (renderedRev[i] === item.rev) continue;
    const el = renderItem(item);
    if (item.rewound) {
      el.classList.add('rewound');
      el.title = 'Rewound: no longer in the model\'s context';
    }
    stats.itemRenders++;
    if (i < nodes.length) {
      nodes[i].replaceWith(el);
    } else {
      fragment.append(el);
    }
    nodes[i] = el;
    renderedRev[i] = item.rev;
  }
  log.append(fragment);
  lastRenderedRev = transcript.rev;
  empty.hidden = transcript.items.length > 0;
  stopButton.hidden = !transcript.running;
  status.textContent = transcript.running
    ? `Working…${transcript.lastUsage ? ` (${formatUsage(transcript.lastUsage)})` : ''} — typing now steers the turn`
    : currentModelName() ? `Model: ${currentModelName()}` : '';
  if (transcript.mode) modeSelect.value = transcript.mode;
  renderModelBar();
  input.placeholder = transcript.running ? 'Steer the running turn… (Enter to send)' : 'Ask tandem… (Enter to send)';
  if (atBottom) log.scrollTop = log.scrollHeight;
  scheduleSave();
}

function scheduleSave(): void {
  if (saveTimer !== undefined) return;
  saveTimer = window.setTimeout(() => {
    saveTimer = undefined;
    vscode.setState({ transcript });
  }, 1000);
}

function resetDom(): void {
  for (const n of nodes) n.remove();
  nodes.length = 0;
  renderedRev.length = 0;
  lastRenderedRev = -1;
}

window.addEventListener('message', (e: MessageEvent<ToWebview>) => {
  const m = e.data;
  switch (m.type) {
    case 'snapshot':
      transcript = m.transcript;
      transcript.truncatedFrom = undefined;
      model = m.model;
      roots = m.roots ?? [];
      resetDom();
      scheduleRender();
      break;
    case 'events':
      for (const ev of m.events) apply(transcript, ev);
      scheduleRender();
      break;
    case 'focusPrompt':
      input.focus();
      break;
  }
});

scheduleRender();
vscode.postMessage({ type: 'ready' });
