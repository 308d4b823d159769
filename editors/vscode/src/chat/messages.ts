/** The messages between the extension and the chat webview: one union each way. */
import type { ApprovalMode, PermissionOptionId } from '../lsp_ext';
import type { Transcript, TranscriptEvent } from './transcript';

export type Attach = 'selection' | 'file';

/** An image pasted or dropped into the prompt: base64 `data`, decoded size in `bytes`. */
export interface PromptImage { mimeType: string; data: string; bytes: number }

/** Webview -> extension. */
export type FromWebview =
  | { type: 'ready' }
  | { type: 'send'; text: string; attach: Attach[]; images?: PromptImage[] }
  | { type: 'cancel' }
  | { type: 'setMode'; mode: ApprovalMode }
  | { type: 'setModel'; model: string; effort?: string }
  | { type: 'newSession' }
  | { type: 'openSession' }
  | { type: 'permission'; requestId: string; optionId: PermissionOptionId | 'cancelled' }
  | { type: 'answer'; requestId: string; answers: Record<string, string> | null }
  | { type: 'proposal'; toolCallId: string; action: 'accept' | 'reject' | 'preview' | 'diff' }
  | { type: 'restoreCheckpoint'; messageId: string }
  | { type: 'fork'; messageId: string };

/** Extension -> webview. */
export type ToWebview =
  | { type: 'snapshot'; transcript: Transcript; model?: string; roots?: string[] }
  | { type: 'events'; events: TranscriptEvent[] }
  | { type: 'focusPrompt' };
