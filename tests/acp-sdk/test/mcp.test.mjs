// MCP servers given in session/new's `mcpServers`: npm's
// @modelcontextprotocol/server-everything (installed by scripts/test from
// tests/mcp's lock file) called by the scripted model, through the
// permission prompt, its answer read by the model next.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import net from "node:net";
import path from "node:path";

import { ModelServer, text, toolCalls, toolNames } from "../lib/model_server.mjs";
import { REPO, acpTest, checkUpdates, schema, tempDir } from "../lib/harness.mjs";

const EVERYTHING = path.join(REPO, "tests/mcp/node_modules/@modelcontextprotocol/server-everything/dist/index.js");

/** The server's stdio definition, or null (a failure under CI=true). */
function everything() {
  if (existsSync(EVERYTHING)) {
    return { name: "everything", command: "node", args: [EVERYTHING, "stdio"], env: [] };
  }
  const why = "server-everything is not installed (scripts/test runs npm ci in tests/mcp)";
  if (process.env.CI === "true") throw new Error(why);
  console.warn(`SKIPPED: ${why}`);
  return null;
}

/** A free loopback port. */
function freePort() {
  return new Promise((resolve, reject) => {
    const probe = net.createServer();
    probe.once("error", reject);
    probe.listen(0, "127.0.0.1", () => {
      const { port } = probe.address();
      probe.close(() => resolve(port));
    });
  });
}

/** server-everything in its streamableHttp mode on a loopback port: {url, stop}. */
async function everythingOverHttp() {
  const port = await freePort();
  const child = spawn("node", [EVERYTHING, "streamableHttp"], {
    env: { ...process.env, PORT: String(port) },
    stdio: "ignore",
  });
  const deadline = Date.now() + 60_000;
  for (;;) {
    const up = await new Promise((resolve) => {
      const socket = net.connect(port, "127.0.0.1", () => { socket.end(); resolve(true); });
      socket.once("error", () => resolve(false));
    });
    if (up) break;
    if (Date.now() > deadline) { child.kill("SIGKILL"); throw new Error(`server-everything never listened on ${port}`); }
    await new Promise((r) => setTimeout(r, 50));
  }
  return { url: `http://127.0.0.1:${port}/mcp`, stop: () => child.kill("SIGKILL") };
}

acpTest("an http MCP server from mcpServers (server-everything's streamableHttp) is called", async ({ connect }) => {
  if (!everything()) return;
  const http = await everythingOverHttp();
  const server = await ModelServer.start();
  const c = await connect(server);
  try {
    const session = await c.agent.request("session/new", {
      cwd: tempDir(),
      mcpServers: [{ type: "http", name: "everything", url: http.url, headers: [{ name: "X-Client", value: "acp-sdk" }] }],
    });
    await c.agent.request("session/set_mode", { sessionId: session.sessionId, modeId: "auto" });
    server.push(toolCalls([["h1", "mcp__everything__echo", { message: "over http" }]]), text("ok"));
    const result = await c.prompt(session.sessionId, "echo it");
    assert.equal(result.stopReason, "end_turn");
    const requests = await server.waitForRequests(2);
    const answer = requests[1].body.messages.find((m) => m.role === "tool" && m.tool_call_id === "h1");
    assert.equal(answer.content, "Echo: over http");
  } finally {
    await c.close();
    await server.close();
    http.stop();
  }
});

acpTest("an MCP server from mcpServers is called, with a permission prompt, and its answer reaches the model", async ({ connect }) => {
  const definition = everything();
  if (!definition) return;
  const server = await ModelServer.start();
  const asked = [];
  const c = await connect(server, {
    handlers: {
      "session/request_permission": ({ params }) => {
        asked.push(params);
        return { outcome: { outcome: "selected", optionId: "allow_once" } };
      },
    },
  });
  try {
    assert.deepEqual(c.init.agentCapabilities.mcpCapabilities, { http: true, sse: false });
    const session = await c.agent.request("session/new", { cwd: tempDir(), mcpServers: [definition] });
    server.push(toolCalls([["m1", "mcp__everything__echo", { message: "hi over acp" }]]), text("Echoed."));
    const result = await c.prompt(session.sessionId, "echo it");
    assert.equal(result.stopReason, "end_turn");

    const requests = await server.waitForRequests(2);
    assert.ok(toolNames(requests[0]).includes("mcp__everything__echo"), toolNames(requests[0]).join(", "));
    const answer = requests[1].body.messages.find((m) => m.role === "tool" && m.tool_call_id === "m1");
    assert.equal(answer.content, "Echo: hi over acp");

    // Asked once, showing the server, the tool and the arguments; ACP's
    // kind for it is `other` (ACP has no `mcp`), the server and tool in
    // `_meta.tandem.mcp`.
    assert.equal(asked.length, 1);
    schema.zRequestPermissionRequest.parse(asked[0]);
    assert.equal(asked[0].toolCall.kind, "other");
    assert.deepEqual(asked[0].toolCall.rawInput, { message: "hi over acp" });
    assert.match(asked[0].toolCall.title, /everything.*echo/);
    const [call] = c.updatesOf(session.sessionId, "tool_call");
    assert.equal(call.kind, "other");
    assert.deepEqual(call._meta.tandem.mcp, { server: "everything", tool: "echo" });
    checkUpdates(c.received);
  } finally {
    await c.close();
    await server.close();
  }
});

acpTest(
  "session/load takes mcpServers again",
  async ({ connect }) => {
    const definition = everything();
    if (!definition) return;
    const server = await ModelServer.start();
    const home = tempDir("tandem-home-");
    let c = await connect(server, { home });
    const cwd = tempDir();
    const { sessionId } = await c.agent.request("session/new", { cwd, mcpServers: [] });
    // A prompted session: an empty one is dropped when its client goes.
    server.push(text("first"));
    await c.prompt(sessionId, "first");
    await c.close();

    c = await connect(server, { home });
    try {
      await c.agent.request("session/load", { sessionId, cwd, mcpServers: [definition] });
      await c.agent.request("session/set_mode", { sessionId, modeId: "auto" });
      server.push(toolCalls([["m2", "mcp__everything__echo", { message: "after load" }]]), text("ok"));
      await c.prompt(sessionId, "echo");
      const requests = await server.waitForRequests(3);
      const answer = requests[2].body.messages.find((m) => m.role === "tool" && m.tool_call_id === "m2");
      assert.equal(answer.content, "Echo: after load");
    } finally {
      await c.close();
      await server.close();
    }
  },
);
