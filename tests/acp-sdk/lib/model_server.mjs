// A scripted OpenAI-compatible model server: real HTTP on a loopback port,
// answering `POST /v1/chat/completions` with server-sent events from a FIFO
// of scripted replies, and recording every request it receives so tests can
// assert on what reached the model.
import http from "node:http";
import { EventEmitter } from "node:events";

const MODEL = "scripted-model";

function chunk(choices) {
  return { id: "chatcmpl-scripted", object: "chat.completion.chunk", created: 0, model: MODEL, choices };
}
const delta = (d) => chunk([{ index: 0, delta: d, finish_reason: null }]);
function ending(reason) {
  return [
    chunk([{ index: 0, delta: {}, finish_reason: reason }]),
    { ...chunk([]), usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 } },
    "[DONE]",
  ];
}

/** A reply that streams `pieces` of text and stops. */
export function text(...pieces) {
  return {
    events: [delta({ role: "assistant", content: "" }), ...pieces.map((p) => delta({ content: p })), ...ending("stop")],
  };
}

/** A reply that calls tools: `[[id, name, argsObject], ...]`. */
export function toolCalls(calls) {
  const events = [delta({ role: "assistant", content: null })];
  calls.forEach(([id, name, args], index) => {
    events.push(delta({ tool_calls: [{ index, id, type: "function", function: { name, arguments: JSON.stringify(args) } }] }));
  });
  return { events: [...events, ...ending("tool_calls")] };
}

export class ModelServer {
  #server;
  #replies = [];
  #sockets = new Set();
  #changed = new EventEmitter();
  /** Every request: `{path, body}` (body parsed as JSON). */
  requests = [];

  static async start() {
    const server = new ModelServer();
    await new Promise((resolve) => server.#server.listen(0, "127.0.0.1", resolve));
    return server;
  }

  constructor() {
    this.#server = http.createServer((req, res) => this.#serve(req, res));
    this.#server.on("connection", (socket) => {
      this.#sockets.add(socket);
      socket.on("close", () => this.#sockets.delete(socket));
    });
  }

  get baseUrl() {
    return `http://127.0.0.1:${this.#server.address().port}/v1`;
  }

  push(...replies) {
    this.#replies.push(...replies);
  }

  /** Resolves when `n` requests have arrived (fails after 20 s). */
  waitForRequests(n) {
    return new Promise((resolve, reject) => {
      const check = () => {
        if (this.requests.length >= n) {
          this.#changed.off("request", check);
          clearTimeout(timer);
          resolve(this.requests);
        }
      };
      const timer = setTimeout(() => {
        this.#changed.off("request", check);
        reject(new Error(`expected ${n} model requests, got ${this.requests.length}`));
      }, 20_000);
      this.#changed.on("request", check);
      check();
    });
  }

  async close() {
    for (const socket of this.#sockets) socket.destroy();
    await new Promise((resolve) => this.#server.close(resolve));
  }

  #serve(req, res) {
    const parts = [];
    req.on("data", (part) => parts.push(part));
    req.on("end", () => {
      let body = null;
      try {
        body = JSON.parse(Buffer.concat(parts).toString("utf8"));
      } catch {
        body = Buffer.concat(parts).toString("utf8");
      }
      this.requests.push({ path: req.url, body });
      this.#changed.emit("request");
      const reply = this.#replies.shift();
      if (!reply) {
        res.writeHead(500, { "content-type": "application/json", connection: "close" });
        res.end(JSON.stringify({ error: { message: "no scripted reply", type: "server_error" } }));
        return;
      }
      res.writeHead(200, { "content-type": "text/event-stream", connection: "close" });
      for (const event of reply.events) {
        res.write(`data: ${typeof event === "string" ? event : JSON.stringify(event)}\n\n`);
      }
      // A `hang` reply keeps the stream open until the client goes away.
      if (!reply.hang) res.end();
    });
  }
}

/** A reply that starts and never finishes (for cancellation). */
export function hang() {
  return { events: [delta({ role: "assistant", content: "thinking" })], hang: true };
}

/** The text of every message the model was sent in request `i`. */
export function transcript(request) {
  return JSON.stringify(request.body.messages);
}

/** The names of the tools offered in a request. */
export function toolNames(request) {
  return (request.body.tools ?? []).map((t) => t.function?.name ?? t.name);
}
