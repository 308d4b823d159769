/**
 * Pure helpers over the daemon's `workspace/applyEdit` params: which tool call
 * proposed it, which files it touches, the proposed text of a file, and the
 * same edit without `needsConfirmation` (for "Accept all"). No VS Code here.
 */
import type { ApplyWorkspaceEditParams, TextEdit, AnnotatedTextEdit, TextDocumentEdit } from 'vscode-languageserver-protocol';
import { PATCH_ANNOTATION_PREFIX, TASK_ANNOTATION_PREFIX } from './lsp_ext';

type DocumentChange = NonNullable<ApplyWorkspaceEditParams['edit']['documentChanges']>[number];

function isTextDocumentEdit(c: DocumentChange): c is TextDocumentEdit {
  return (c as TextDocumentEdit).textDocument !== undefined && (c as TextDocumentEdit).edits !== undefined;
}

/** Whether any change annotation asks the user to confirm. */
export function needsConfirmation(params: ApplyWorkspaceEditParams): boolean {
  return Object.values(params.edit.changeAnnotations ?? {}).some((a) => a.needsConfirmation === true);
}

/** The tool call whose patch this is (`tandem-patch-<toolCallId>`), if tandem sent it. */
export function toolCallIdOf(params: ApplyWorkspaceEditParams): string | undefined {
  for (const id of Object.keys(params.edit.changeAnnotations ?? {})) {
    if (id.startsWith(PATCH_ANNOTATION_PREFIX)) return id.slice(PATCH_ANNOTATION_PREFIX.length);
  }
  return undefined;
}

/**
 * Which proposal this is: an agent patch (keyed by its tool call) or a
 * task's inline edit (`tandem-task-<sessionId>-<turnId>`, keyed by the annotation id),
 * or undefined for an edit tandem did not annotate.
 */
export function proposalOf(params: ApplyWorkspaceEditParams): { id: string; kind: 'patch' | 'task' } | undefined {
  const patch = toolCallIdOf(params);
  if (patch !== undefined) return { id: patch, kind: 'patch' };
  const task = Object.keys(params.edit.changeAnnotations ?? {}).find((id) => id.startsWith(TASK_ANNOTATION_PREFIX));
  return task ? { id: task, kind: 'task' } : undefined;
}

/** Every document URI the edit changes, creates, renames or deletes, in order. */
export function filesOf(params: ApplyWorkspaceEditParams): string[] {
  const out: string[] = [];
  for (const c of params.edit.documentChanges ?? []) {
    if (isTextDocumentEdit(c)) out.push(c.textDocument.uri);
    else if ('kind' in c && c.kind === 'rename') out.push(c.newUri);
    else if ('kind' in c) out.push(c.uri);
  }
  for (const uri of Object.keys(params.edit.changes ?? {})) out.push(uri);
  return [...new Set(out)];
}

/** The text edits of one document (all `TextDocumentEdit`s for it, in order). */
export function editsFor(params: ApplyWorkspaceEditParams, uri: string): (TextEdit | AnnotatedTextEdit)[] {
  const out: (TextEdit | AnnotatedTextEdit)[] = [];
  for (const c of params.edit.documentChanges ?? []) {
    if (isTextDocumentEdit(c) && c.textDocument.uri === uri) {
      out.push(...(c.edits.filter((e) => 'range' in e) as (TextEdit | AnnotatedTextEdit)[]));
    }
  }
  out.push(...(params.edit.changes?.[uri] ?? []));
  return out;
}

/** Offset of an LSP (UTF-16) position in `text`; past the end of a line means its end. */
export function offsetAt(text: string, line: number, character: number): number {
  let offset = 0;
  for (let l = 0; l < line; l++) {
    const nl = text.indexOf('\n', offset);
    if (nl < 0) return text.length;
    offset = nl + 1;
  }
  let end = text.indexOf('\n', offset);
  if (end < 0) end = text.length;
  if (end > offset && text[end - 1] === '\r') end--;
  return Math.min(offset + character, end);
}

/** `text` with `edits` applied (LSP semantics: all ranges refer to the original text). */
export function applyTextEdits(text: string, edits: readonly TextEdit[]): string {
  const spans = edits
    .map((e, i) => ({
      start: offsetAt(text, e.range.start.line, e.range.start.character),
      end: offsetAt(text, e.range.end.line, e.range.end.character),
      newText: e.newText,
      i,
    }))
    .sort((a, b) => a.start - b.start || a.i - b.i);
  let out = '';
  let at = 0;
  for (const s of spans) {
    if (s.start < at) throw new Error('overlapping edits');
    out += text.slice(at, s.start) + s.newText;
    at = s.end;
  }
  return out + text.slice(at);
}

/** A copy of the edit whose annotations no longer ask for confirmation. */
export function withoutConfirmation(params: ApplyWorkspaceEditParams): ApplyWorkspaceEditParams {
  const copy = JSON.parse(JSON.stringify(params)) as ApplyWorkspaceEditParams;
  for (const a of Object.values(copy.edit.changeAnnotations ?? {})) a.needsConfirmation = false;
  return copy;
}
