/**
 * The session's model and its context in the chat: folding
 * `current_model_update` and the `context` of `usage` updates into the
 * transcript, and the context meter's words. No VS Code or DOM here: the
 * extension, the webview and the unit tests share it.
 */
import type { SessionUpdate } from '../lsp_ext';
import type { Transcript } from './transcript';

export function applyModelUpdate(t: Transcript, u: Extract<SessionUpdate, { sessionUpdate: 'current_model_update' }>): void {
  if (!t.models) return;
  t.models = { ...t.models, model: u.modelId, effort: u.effort };
}

export function applyUsageContext(t: Transcript, u: Extract<SessionUpdate, { sessionUpdate: 'usage' }>): void {
  if (u.context) t.context = { ...u.context };
  if (u.session.costUsd !== undefined) t.sessionCost = u.session.costUsd;
  t.lastCall = u.call;
}

/** `12.3k` for 12,345. */
function tokens(n: number): string {
  return n >= 1000 ? `${(n / 1000).toFixed(1)}k` : String(n);
}

export interface ContextMeter {
  /** `15 / 32.0k (0%)`. */
  text: string;
  /** 0..1, for the bar. */
  ratio: number;
  /** The figures in words, and the cost. */
  tooltip: string;
}

/** The context meter of the transcript's session, once a call reported it. */
export function contextMeter(t: Transcript): ContextMeter | undefined {
  const c = t.context;
  if (!c || c.size <= 0) return undefined;
  const ratio = Math.min(1, c.used / c.size);
  const percent = Math.round(ratio * 100);
  const lines = [`Context: ${c.used.toLocaleString('en-US')} of ${c.size.toLocaleString('en-US')} tokens (${percent}%)`];
  if (t.lastCall) {
    lines.push(`Last call: ${t.lastCall.inputTokens.toLocaleString('en-US')} in · ${t.lastCall.outputTokens.toLocaleString('en-US')} out`);
  }
  if (t.lastUsage?.costUsd !== undefined) lines.push(`Turn cost: $${t.lastUsage.costUsd.toFixed(4)}`);
  lines.push(t.sessionCost !== undefined ? `Session cost: $${t.sessionCost.toFixed(4)}` : 'Cost: unknown (no price for this model)');
  return { text: `${tokens(c.used)} / ${tokens(c.size)} (${percent}%)`, ratio, tooltip: lines.join('\n') };
}

/** The efforts the current model lists (none: no effort picker). */
export function currentEfforts(t: Transcript): string[] {
  const m = t.models;
  return m?.models.find((x) => x.id === m.model)?.efforts ?? [];
}
