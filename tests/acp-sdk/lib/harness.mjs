// Spawns the real `tandem acp` binary and connects the official ACP SDK's
// client to it, with a tap on both directions so tests can check the raw
// wire (fields the SDK would strip or map silently).
//
// Every test runs twice (`acpTest`): against `tandem acp`, and against
// `tandem acp --attach` relaying to a `tandem serve` it starts in the
// test's TANDEM_HOME (stopped with `tandem serve --stop` when the client
// closes). An ACP client must see no difference between the two.
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { Readable, Writable } from "node:stream";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

import { client, ndJsonStream, PROTOCOL_VERSION } from "@agentclientprotocol/sdk";

const here = path.dirname(fileURLToPath(import.meta.url));
export const REPO = path.resolve(here, "../../..");
// The SDK's generated zod schemas, for explicit checks of what it maps
// silently (it is not in the package's exports, so by path).
export const schema = await import(
  path.join(here, "../node_modules/@agentclientprotocol/sdk/dist/v1/schema/zod.gen.js")
);

export function tandemBin() {
  return process.env.TANDEM_BIN ?? path.join(REPO, "target/debug/tandem");
}

export function tempDir(prefix = "tandem-acp-") {
  return mkdtempSync(path.join(tmpdir(), prefix));
}

/** The ways in: `tandem acp`, and `tandem acp --attach` through a serve. */
export const MODES = ["stdio", "attach"];

/**
 * Registers `run` as a test in each mode (`TANDEM_ACP_MODES=attach` runs
 * one). `run` gets `{connect, mode}`, `connect` bound to the mode.
 * `attach`, when given, is why the test cannot pass through the shim
 * (yet): its attach run is skipped with that reason, which protocol.md's
 * serve section records too.
 */
export function acpTest(name, run, { attach } = {}) {
  const only = process.env.TANDEM_ACP_MODES?.split(",");
  for (const mode of MODES) {
    if (only && !only.includes(mode)) continue;
    const options = mode === "attach" && attach ? { skip: attach } : {};
    const title = mode === "stdio" ? name : `${name} [acp --attach]`;
    test(title, options, async () => {
      // Every serve this test started is stopped, even when it failed
      // before closing its clients.
      const homes = new Set();
      const bound = (server, opts = {}) => {
        const home = opts.home ?? tempDir("tandem-home-");
        if (mode === "attach") homes.add(home);
        return connect(server, { ...opts, home, ownHome: !opts.home, mode });
      };
      try {
        await run({ mode, connect: bound });
      } finally {
        for (const home of homes) await stopServe(home);
      }
    });
  }
}

/**
 * Starts `tandem acp` (`mode` "attach": `tandem acp --attach`) against
 * `server` with `home` as TANDEM_HOME, and connects a client whose
 * request handlers are `handlers` (method -> handler) and which records
 * every session/update.
 */
export async function connect(server, { home, handlers = {}, capabilities = {}, mode = "stdio", ownHome = !home } = {}) {
  home ??= tempDir("tandem-home-");
  const args = mode === "attach" ? ["acp", "--attach"] : ["acp"];
  const child = spawn(tandemBin(), args, {
    env: {
      ...process.env,
      TANDEM_HOME: home,
      TANDEM_BASE_URL: server.baseUrl,
      TANDEM_MODEL: "scripted-model",
      TANDEM_LOG: "warn",
      TANDEM_FSYNC: "0",
    },
    stdio: ["pipe", "pipe", "inherit"],
  });
  const exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })));
  const raw = ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
  const received = [];
  const sent = [];
  const readable = raw.readable.pipeThrough(
    new TransformStream({
      transform(message, controller) {
        received.push(message);
        controller.enqueue(message);
      },
    }),
  );
  const outgoing = new TransformStream({
    transform(message, controller) {
      sent.push(message);
      controller.enqueue(message);
    },
  });
  outgoing.readable.pipeTo(raw.writable).catch(() => {});

  const updates = [];
  const app = client().onNotification("session/update", ({ params }) => {
    updates.push(params);
  });
  for (const [method, handler] of Object.entries(handlers)) app.onRequest(method, handler);
  const connection = app.connect({ readable, writable: outgoing.writable });
  const agent = connection.agent;
  const init = await agent.request("initialize", {
    protocolVersion: PROTOCOL_VERSION,
    clientCapabilities: capabilities,
  });

  return {
    agent,
    init,
    home,
    received,
    sent,
    updates,
    /** The raw response to the request with JSON-RPC id `id`. */
    rawResponse(method) {
      const request = sent.filter((m) => m.method === method).at(-1);
      return received.find((m) => m.id === request.id && !("method" in m));
    },
    /** The updates of a session, by kind. */
    updatesOf(sessionId, kind) {
      return updates
        .filter((u) => u.sessionId === sessionId && (!kind || u.update.sessionUpdate === kind))
        .map((u) => u.update);
    },
    async newSession(cwd) {
      return agent.request("session/new", { cwd, mcpServers: [] });
    },
    prompt(sessionId, text) {
      return agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text }] });
    },
    /** Ends the agent by closing its stdin and waits for it to exit. */
    async close() {
      connection.close();
      child.stdin.end();
      let timer;
      const status = await Promise.race([
        exited,
        new Promise((resolve) => (timer = setTimeout(() => resolve(null), 10_000))),
      ]);
      clearTimeout(timer);
      if (status === null) child.kill("SIGKILL");
      if (mode === "attach") await stopServe(home);
      if (ownHome) rmSync(home, { recursive: true, force: true });
      return status;
    },
  };
}

/**
 * Stops the serve a shim started in `home` (waiting until it is gone), so
 * no test leaves one running.
 */
export async function stopServe(home) {
  const stop = spawn(tandemBin(), ["serve", "--stop"], {
    env: { ...process.env, TANDEM_HOME: home, TANDEM_LOG: "warn" },
    stdio: ["ignore", "ignore", "pipe"],
  });
  let stderr = "";
  stop.stderr.on("data", (d) => (stderr += d));
  const timer = setTimeout(() => stop.kill("SIGKILL"), 15_000);
  const code = await new Promise((resolve) => stop.on("exit", resolve));
  clearTimeout(timer);
  if (code !== 0) throw new Error(`tandem serve --stop failed (${code}): ${stderr}`);
}

/** Every session/update on the raw wire, checked against the SDK's schema. */
export function checkUpdates(received) {
  for (const message of received.filter((m) => m.method === "session/update")) {
    schema.zSessionNotification.parse(message.params);
  }
}

/** Resolves when `predicate` holds, checked whenever `received` grows. */
export async function until(predicate, what, limitMs = 20_000) {
  const start = Date.now();
  while (!predicate()) {
    if (Date.now() - start > limitMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}
