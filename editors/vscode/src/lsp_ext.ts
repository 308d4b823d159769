/**
 * Typed twins of tandem's wire (protocol.md): one constant per method, one
 * interface per shape. Nothing here knows about VS Code, so the protocol
 * tests (plain Node + vscode-jsonrpc) use the same definitions as the
 * extension.
 */
import { NotificationType, RequestType } from 'vscode-jsonrpc';

export type ApprovalMode = 'read-only' | 'review' | 'auto';
export const APPROVAL_MODES: readonly ApprovalMode[] = ['read-only', 'review', 'auto'];

export type ContentBlock =
  | { type: 'text'; text: string }
  | { type: 'resource_link'; uri: string; name?: string }
  | { type: 'resource'; resource: { uri: string; text?: string; mimeType?: string } }
  | { type: 'image'; mimeType: string; data: string };

export interface Usage {
  inputTokens: number;
  outputTokens: number;
  cachedTokens: number;
  costUsd?: number;
}

export type StopReason =
  | 'end_turn' | 'max_tokens' | 'max_iterations' | 'token_budget' | 'timeout'
  | 'loop_detected' | 'refusal' | 'cancelled' | 'blocked' | 'error' | 'interrupted'
  | 'context_overflow';

// ---- editor -> daemon ------------------------------------------------------

export interface NewSessionParams { workspaceFolder?: string; title?: string; config?: Record<string, unknown> }
/** An instruction file (`AGENTS.md`) the model is given; protocol.md "Project instructions". */
export interface InstructionFile { path: string; bytes: number; sha256: string; includedBytes?: number }
/** A model a session can switch to (`default` is `[model]`); protocol.md `tandem/setModel`. */
export interface WireModel { id: string; name: string; efforts: string[]; contextWindow: number }
/** The model and effort in force, and the models to switch to. */
export interface ModelState { model: string; effort?: string; models: WireModel[] }
export interface NewSessionResult extends ModelState { sessionId: string; mode: ApprovalMode; instructions: InstructionFile[] }
export const newSession = new RequestType<NewSessionParams, NewSessionResult, void>('tandem/newSession');

export interface PromptParams { sessionId: string; prompt: ContentBlock[] }
export interface PromptResult { turnId: string | null; stopReason: StopReason; message?: string; usage: Usage; /** The prompt's own message id (`tandem/forkSession` takes it). */ messageId?: string }
export const prompt = new RequestType<PromptParams, PromptResult, void>('tandem/prompt');

export interface SteerParams { sessionId: string; prompt: ContentBlock[]; wake?: boolean }
export const steer = new RequestType<SteerParams, { messageId: string }, void>('tandem/steer');

export interface CancelParams { sessionId: string; keepInbox?: boolean }
export const cancel = new NotificationType<CancelParams>('tandem/cancel');

export interface SetModeParams { sessionId: string; mode: ApprovalMode }
export const setMode = new RequestType<SetModeParams, { mode: ApprovalMode }, void>('tandem/setMode');

export interface SetModelParams { sessionId: string; model: string; effort?: string }
export const setModel = new RequestType<SetModelParams, ModelState, void>('tandem/setModel');

export interface SessionSummary {
  sessionId: string;
  title: string;
  workspace: string[];
  created: string;
  updated: string;
  state: 'running' | 'idle' | 'interrupted' | 'unreadable';
  turnCount: number;
  kind?: string;
  /** No prompt ever reached the session. */
  empty?: boolean;
}
export const listSessions = new RequestType<{ workspaceFolder?: string }, { sessions: SessionSummary[] }, void>(
  'tandem/listSessions',
);
/** The session's title is the first line of its first prompt until renamed. */
export const renameSession = new RequestType<{ sessionId: string; title: string }, { title: string }, void>('tandem/renameSession');
/** Frees a session (its log stays). */
export const closeSession = new RequestType<{ sessionId: string }, Record<string, never>, void>('tandem/closeSession');
/** Removes a session's log; `-32005` while a turn runs. */
export const deleteSession = new RequestType<{ sessionId: string }, Record<string, never>, void>('tandem/deleteSession');
/** A new session with the history before the turn `messageId` opened (all of it without one), loaded without a replay. */
export const forkSession = new RequestType<{ sessionId: string; messageId?: string }, { sessionId: string; mode: ApprovalMode }, void>(
  'tandem/forkSession',
);
/** `tandem/listMcpServers` (protocol.md, MCP servers). */
export interface McpServerInfo {
  name: string;
  state: 'starting' | 'ready' | 'failed' | 'stopped';
  error?: string;
  tools: { name: string; tool: string; description: string; readOnly: boolean }[];
}
export const listMcpServers = new RequestType<{ sessionId?: string }, { servers: McpServerInfo[] }, void>(
  'tandem/listMcpServers',
);
/** `tandem/rewind`: files and/or the conversation back to before a user message (or a rewind undone). */
export interface RewindParams {
  sessionId: string;
  toMessageId: string;
  files: boolean;
  conversation: boolean;
  force?: boolean | string[];
  dryRun?: boolean;
}
export type RewindStatus = 'restore' | 'restored' | 'conflict' | 'unrestorable' | 'unchanged' | 'failed';
export interface RewindFile { path: string; status: RewindStatus; diff?: string; reason?: string }
export interface RewindResult { rewindId?: string; files: RewindFile[]; conversation: boolean }
export const rewind = new RequestType<RewindParams, RewindResult, void>('tandem/rewind');

export const loadSession = new RequestType<{ sessionId: string }, ModelState & { sessionId: string; replayed: number; mode: ApprovalMode; instructions: InstructionFile[] }, void>(
  'tandem/loadSession',
);

// ---- keybinding tasks (issue 11) -------------------------------------------

export interface LspRange { start: { line: number; character: number }; end: { line: number; character: number } }
export interface RunTaskArgs {
  task: string;
  uri: string;
  range: LspRange;
  version?: number;
  diagnostics?: unknown[];
  instruction?: string;
  sessionId?: string;
}
export interface StartedTaskResult { sessionId: string; turnId: string | null }
export interface RunTaskParams {
  task: string;
  textDocument: { uri: string; version?: number };
  range: LspRange;
  instruction?: string;
  diagnostics?: unknown[];
  sessionId?: string;
}
export const runTask = new RequestType<RunTaskParams, PromptResult & { sessionId: string }, void>('tandem/runTask');
export const RUN_TASK_COMMAND = 'tandem.runTask';
export const BUILTIN_TASKS = ['explain', 'fix', 'edit', 'tests', 'document'] as const;

// ---- daemon -> editor ------------------------------------------------------

export interface ToolCallDiff { type: 'diff'; path: string; oldText?: string; newText: string }
export type ToolCallContent = { type: 'content'; content: ContentBlock } | ToolCallDiff;
/** A place a tool call reads or changes: absolute path, 1-based line. */
export interface ToolCallLocation { path: string; line?: number }
export interface PlanEntry { content: string; priority: string; status: 'pending' | 'in_progress' | 'completed' }

export type SessionUpdate =
  | { sessionUpdate: 'input_status'; messageIds: string[]; status: 'pending' | 'claimed' | 'discarded'; queue?: string; reason?: string }
  | { sessionUpdate: 'user_message'; messageId: string; content: ContentBlock[] }
  | { sessionUpdate: 'agent_message_chunk'; messageId?: string; content: { type: 'text'; text: string } }
  | { sessionUpdate: 'agent_thought_chunk'; messageId?: string; content: { type: 'text'; text: string } }
  | { sessionUpdate: 'agent_message_reset' }
  | { sessionUpdate: 'tool_call'; toolCallId: string; title: string; kind: string; status: string; rawInput?: unknown }
  | {
      sessionUpdate: 'tool_call_update';
      toolCallId: string;
      status?: 'pending' | 'in_progress' | 'completed' | 'failed';
      waitingFor?: 'permission' | 'input';
      outputDelta?: string;
      content?: ToolCallContent[];
      locations?: ToolCallLocation[];
    }
  | { sessionUpdate: 'plan'; entries: PlanEntry[] }
  | { sessionUpdate: 'context_compacted'; removedMessages: number; summarized: boolean }
  | { sessionUpdate: 'current_mode_update'; currentModeId: ApprovalMode }
  | { sessionUpdate: 'session_info'; title: string }
  | { sessionUpdate: 'current_model_update'; modelId: string; name: string; effort?: string }
  | { sessionUpdate: 'usage'; call: Usage; turn: Usage; session: Usage; context?: { used: number; size: number } }
  | { sessionUpdate: 'rewound'; rewindId: string; toMessageId: string; conversation: boolean; droppedMessageIds: string[]; restoredMessageIds?: string[] }
  | { sessionUpdate: 'turn_end'; stopReason: StopReason; message?: string; usage: Usage };

export interface UpdateParams { sessionId: string; turnId?: string; update: SessionUpdate }
export const update = new NotificationType<UpdateParams>('tandem/update');

/** Each option of a request has a kind of its own (`optionId` = `kind`); a run outside the exec sandbox is a request of its own. */
export type PermissionOptionId = 'allow_once' | 'allow_always' | 'reject_once' | 'reject_always';
export type PermissionOptionKind = 'allow_once' | 'allow_always' | 'reject_once' | 'reject_always';
export interface PermissionOption { optionId: PermissionOptionId; name: string; kind: PermissionOptionKind }
export interface RequestPermissionParams {
  sessionId: string;
  toolCall: { toolCallId: string; title: string; kind: string; status: string; rawInput?: unknown; content?: ToolCallContent[] };
  options: PermissionOption[];
}
export type RequestPermissionResult =
  | { outcome: { outcome: 'selected'; optionId: PermissionOptionId; reason?: string } }
  | { outcome: { outcome: 'cancelled' } };
export const requestPermission = new RequestType<RequestPermissionParams, RequestPermissionResult, void>(
  'tandem/requestPermission',
);

export interface Question { id: string; question: string; options?: { label: string; description?: string }[] }
export interface RequestUserInputParams { sessionId: string; toolCallId: string; questions: Question[] }
export type RequestUserInputResult = { answers: Record<string, string> } | { outcome: 'cancelled' };
export const requestUserInput = new RequestType<RequestUserInputParams, RequestUserInputResult, void>(
  'tandem/requestUserInput',
);

/** `tandem-patch-<toolCallId>`: the change annotation of one agent patch. */
export const PATCH_ANNOTATION_PREFIX = 'tandem-patch-';
/** `tandem-task-<sessionId>-<turnId>`: the change annotation of a task's inline edit of a selection. */
export const TASK_ANNOTATION_PREFIX = 'tandem-task-';

// ---- the editor's language servers (issue 27) --------------------------------

/** An LSP diagnostic (severity 1 = error … 4 = hint). */
export interface LspDiagnostic { range: LspRange; severity?: number; message: string; source?: string; code?: string | number }
/** One file's diagnostics, for the document version they are for (`null`: not open). */
export interface FileDiagnostics { uri: string; version: number | null; diagnostics: LspDiagnostic[] }
export interface LspLocation { uri: string; range: LspRange }
export interface WireSymbol { name: string; kind: number; containerName?: string; location: LspLocation }
/** Every answer may be empty with the reason. */
export interface DiagnosticsResult { files: FileDiagnostics[]; reason?: string }
export interface LocationsResult { locations: LspLocation[]; reason?: string }
export interface WorkspaceSymbolsResult { symbols: WireSymbol[]; reason?: string }
export interface SymbolAtParams { uri: string; position: { line: number; character: number }; includeDeclaration?: boolean }
export const diagnostics = new RequestType<{ uris?: string[] }, DiagnosticsResult, void>('tandem/diagnostics');
export const definition = new RequestType<SymbolAtParams, LocationsResult, void>('tandem/definition');
export const references = new RequestType<SymbolAtParams, LocationsResult, void>('tandem/references');
export const workspaceSymbols = new RequestType<{ query: string }, WorkspaceSymbolsResult, void>('tandem/workspaceSymbols');
/** editor -> daemon: a document's diagnostics changed. */
export const diagnosticsChanged = new NotificationType<FileDiagnostics>('tandem/diagnosticsChanged');
export const LANGUAGE_FEATURES = ['diagnostics', 'definition', 'references', 'symbols'] as const;

/** The client capabilities tandem reads beyond the language client's own. */
export const TANDEM_EXPERIMENTAL_CAPABILITIES = {
  requestPermission: true,
  requestUserInput: true,
  languageFeatures: LANGUAGE_FEATURES,
} as const;

/** Human words for a stop reason. */
export function describeStopReason(reason: StopReason | string): string {
  switch (reason) {
    case 'end_turn': return 'Done';
    case 'max_tokens': return 'Cut off at the output token limit';
    case 'max_iterations': return 'Stopped: too many model calls';
    case 'token_budget': return 'Stopped: token budget used up';
    case 'timeout': return 'Stopped: no progress';
    case 'loop_detected': return 'Stopped a loop';
    case 'refusal': return 'The model refused';
    case 'cancelled': return 'Cancelled';
    case 'blocked': return 'Input rejected';
    case 'error': return 'Failed';
    case 'interrupted': return 'Interrupted (the daemon stopped)';
    case 'context_overflow': return 'Stopped: the request does not fit the context window';
    default: return String(reason);
  }
}
