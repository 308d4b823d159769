/** Pure helpers of the keybinding tasks: the task list and the shape of `tandem.runTask` arguments. */
import type { RunTaskArgs } from './lsp_ext';

export const BUILTIN_TASK_TITLES: Record<string, string> = {
  explain: 'Explain',
  fix: 'Fix',
  edit: 'Edit selection…',
  tests: 'Write tests',
  document: 'Document',
};

/** Tasks whose result is one edit of the selection, reviewed as a diff. */
export const SELECTION_EDIT_TASKS: ReadonlySet<string> = new Set(['edit', 'document']);

export interface ConfiguredTask { title?: string; enabled?: boolean }

/** The task list for the QuickPick: built-ins first, then configured ones; disabled ones left out. */
export function taskChoices(configured: Record<string, ConfiguredTask> | undefined): { id: string; title: string }[] {
  const out: { id: string; title: string }[] = [];
  for (const [id, title] of Object.entries(BUILTIN_TASK_TITLES)) {
    if (configured?.[id]?.enabled === false) continue;
    out.push({ id, title: configured?.[id]?.title ?? title });
  }
  for (const [id, t] of Object.entries(configured ?? {})) {
    if (id in BUILTIN_TASK_TITLES || t.enabled === false) continue;
    out.push({ id, title: t.title ?? id });
  }
  return out;
}

/** Whether `a` (a code action's argument) is a `tandem.runTask` argument. */
export function isRunTaskArgs(a: unknown): a is RunTaskArgs {
  const o = a as RunTaskArgs | undefined;
  return typeof o?.task === 'string' && typeof o.uri === 'string' && typeof o.range === 'object' && o.range !== null;
}
