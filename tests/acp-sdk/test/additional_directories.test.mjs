// ACP's additionalDirectories on session/new (advertised as
// sessionCapabilities.additionalDirectories): more workspace roots the
// tools reach into and walk, and nothing outside them.
import assert from "node:assert/strict";
import { realpathSync, writeFileSync } from "node:fs";
import path from "node:path";

import { ModelServer, text, toolCalls } from "../lib/model_server.mjs";
import { acpTest, tempDir } from "../lib/harness.mjs";

acpTest("session/new's additionalDirectories are roots the tools reach and walk", async ({ connect }) => {
  const [main, more, outside] = [tempDir(), tempDir(), tempDir()].map((d) => realpathSync(d));
  writeFileSync(path.join(main, "a.txt"), "alpha needle\n");
  writeFileSync(path.join(more, "b.txt"), "beta needle\n");
  writeFileSync(path.join(outside, "c.txt"), "gamma needle\n");
  const server = await ModelServer.start();
  const c = await connect(server);
  try {
    assert.deepEqual(c.init.agentCapabilities.sessionCapabilities.additionalDirectories, {});
    await assert.rejects(
      c.agent.request("session/new", { cwd: main, additionalDirectories: ["relative"], mcpServers: [] }),
      (e) => e.code === -32602 && /additionalDirectories\[0\]/.test(e.message),
    );
    const { sessionId } = await c.agent.request("session/new", {
      cwd: main,
      additionalDirectories: [more],
      mcpServers: [],
    });
    server.push(
      toolCalls([
        ["r1", "read_file", { path: path.join(more, "b.txt") }],
        ["r2", "read_file", { path: path.join(outside, "c.txt") }],
        ["g1", "grep", { pattern: "needle" }],
      ]),
      text("done"),
    );
    assert.equal((await c.prompt(sessionId, "look")).stopReason, "end_turn");
    const requests = await server.waitForRequests(2);
    const results = Object.fromEntries(
      requests[1].body.messages.filter((m) => m.role === "tool").map((m) => [m.tool_call_id, m.content]),
    );
    assert.match(results.r1, /beta needle/);
    assert.match(results.r2, /outside the workspace/);
    assert.match(results.g1, /alpha needle/);
    assert.match(results.g1, /beta needle/);
    assert.doesNotMatch(results.g1, /gamma/);
  } finally {
    await c.close();
    await server.close();
  }
});
