/**
 * A scripted OpenAI-compatible model server: real HTTP on a loopback port,
 * real SSE (`text/event-stream`, one event per write). Replies are played
 * from a FIFO queue; every request is recorded with its parsed body, so
 * tests assert on what the daemon sent the model. An empty queue answers
 * HTTP 500 "no scripted reply". The Node twin of tests/support/model_server.rs.
 */
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';

export const MODEL_NAME = 'scripted-model';

export type Step =
  | { data: unknown }
  | { delayMs: number }
  /** Wait until the test calls `release()` (or the client hangs up). */
  | { gate: Promise<void> };

export interface Reply { steps: Step[] }

export interface RecordedRequest {
  path: string;
  body: {
    model?: string;
    messages?: { role: string; content?: unknown; tool_calls?: unknown[]; tool_call_id?: string }[];
    tools?: { function: { name: string } }[];
  };
}

const chunk = (choices: unknown[]) => ({ data: { id: 'chatcmpl-scripted', object: 'chat.completion.chunk', created: 0, model: MODEL_NAME, choices } });
export const delta = (d: Record<string, unknown>): Step => chunk([{ index: 0, delta: d, finish_reason: null }]);
const ending = (reason: string): Step[] => [
  chunk([{ index: 0, delta: {}, finish_reason: reason }]),
  { data: { id: 'chatcmpl-scripted', object: 'chat.completion.chunk', created: 0, model: MODEL_NAME, choices: [], usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 } } },
  { data: '[DONE]' },
];

/** Text streamed in the given pieces, then `stop`. */
export function text(...pieces: string[]): Reply {
  return { steps: [delta({ role: 'assistant', content: '' }), ...pieces.map((p) => delta({ content: p })), ...ending('stop')] };
}

/** Text pieces with a pause before the ending (so a test can act while the turn streams). */
export function textThen(pieces: string[], gate: Promise<void>): Reply {
  return { steps: [delta({ role: 'assistant', content: '' }), ...pieces.map((p) => delta({ content: p })), { gate }, ...ending('stop')] };
}

/** One tool call `(id, name, arguments)`, then `tool_calls`. */
export function toolCall(id: string, name: string, args: unknown): Reply {
  return {
    steps: [
      delta({ role: 'assistant', content: null }),
      delta({ tool_calls: [{ index: 0, id, type: 'function', function: { name, arguments: '' } }] }),
      delta({ tool_calls: [{ index: 0, function: { arguments: JSON.stringify(args) } }] }),
      ...ending('tool_calls'),
    ],
  };
}

export function gate(): { promise: Promise<void>; release: () => void } {
  let release!: () => void;
  const promise = new Promise<void>((r) => (release = r));
  return { promise, release };
}

export class ModelServer {
  readonly requests: RecordedRequest[] = [];
  private readonly queue: Reply[] = [];
  private readonly waiters: (() => void)[] = [];
  private readonly server: http.Server;

  private constructor() {
    this.server = http.createServer((req, res) => void this.handle(req, res));
  }

  static async start(): Promise<ModelServer> {
    const s = new ModelServer();
    await new Promise<void>((resolve) => s.server.listen(0, '127.0.0.1', resolve));
    return s;
  }

  get baseUrl(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/v1`;
  }

  /** A session `config` (for `tandem/newSession`) pointing at this server. */
  sessionConfig(): Record<string, unknown> {
    return {
      model: { base_url: this.baseUrl, name: MODEL_NAME, api_key_env: 'TANDEM_TEST_NO_KEY' },
      limits: { retry_base_delay_ms: 1, retry_max_delay_ms: 5 },
    };
  }

  /** Drops the replies nobody asked for (after a failed test). */
  clear(): void {
    this.queue.length = 0;
  }

  push(...replies: Reply[]): void {
    this.queue.push(...replies);
  }

  /** Resolves once `n` requests have arrived (fails after 20 s: a guard, not a wait). */
  async waitForRequests(n: number): Promise<RecordedRequest[]> {
    const deadline = Date.now() + 20_000;
    while (this.requests.length < n) {
      if (Date.now() > deadline) throw new Error(`the model server got ${this.requests.length} requests, expected ${n}`);
      await new Promise<void>((resolve) => {
        this.waiters.push(resolve);
        setTimeout(resolve, 200);
      });
    }
    return this.requests.slice(0, n);
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    let body: RecordedRequest['body'] = {};
    try {
      body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as RecordedRequest['body'];
    } catch {
      // recorded as empty; the test's assertions will say so
    }
    this.requests.push({ path: req.url ?? '', body });
    for (const w of this.waiters.splice(0)) w();
    const reply = this.queue.shift();
    if (!reply) {
      res.writeHead(500, { 'content-type': 'application/json', connection: 'close' });
      res.end(JSON.stringify({ error: { message: 'no scripted reply', type: 'server_error' } }));
      return;
    }
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'close' });
    let gone = false;
    res.on('close', () => (gone = true));
    for (const step of reply.steps) {
      if (gone) return;
      if ('data' in step) {
        res.write(`data: ${typeof step.data === 'string' ? step.data : JSON.stringify(step.data)}\n\n`);
      } else if ('delayMs' in step) {
        await new Promise((r) => setTimeout(r, step.delayMs));
      } else {
        await Promise.race([step.gate, new Promise<void>((r) => res.on('close', () => r()))]);
      }
    }
    res.end();
  }
}

/** The text of the last user message a request carried. */
export function lastUserText(r: RecordedRequest): string {
  const users = (r.body.messages ?? []).filter((m) => m.role === 'user');
  const c = users.at(-1)?.content;
  if (typeof c === 'string') return c;
  if (Array.isArray(c)) return c.map((p: { text?: string }) => p.text ?? '').join('');
  return '';
}
