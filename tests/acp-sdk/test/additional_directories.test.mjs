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

// session/load, session/resume and session/fork take them too: the
// session's roots are its logged ones plus those given (a fork keeps its
// own in its log).
acpTest("session/load, resume and fork take additionalDirectories", async ({ connect }) => {
  const [main, one, two, three] = [tempDir(), tempDir(), tempDir(), tempDir()].map((d) => realpathSync(d));
  writeFileSync(path.join(one, "one.txt"), "first extra\n");
  writeFileSync(path.join(two, "two.txt"), "second extra\n");
  writeFileSync(path.join(three, "three.txt"), "third extra\n");
  const server = await ModelServer.start();
  const c = await connect(server);
  // One turn that reads `files`: this turn's tool results, in order.
  let turn = 0;
  const read = async (sessionId, files) => {
    turn += 1;
    const calls = files.map((f, i) => [`t${turn}c${i}`, "read_file", { path: f }]);
    server.push(toolCalls(calls), text("done"));
    assert.equal((await c.prompt(sessionId, "read")).stopReason, "end_turn");
    const requests = await server.waitForRequests(2 * turn);
    const tool = requests.at(-1).body.messages.filter((m) => m.role === "tool");
    return calls.map(([id]) => tool.find((m) => m.tool_call_id === id).content);
  };
  try {
    const { sessionId } = await c.agent.request("session/new", { cwd: main, mcpServers: [] });
    const [first] = await read(sessionId, [path.join(one, "one.txt")]);
    assert.match(first, /outside the workspace/);
    await assert.rejects(
      c.agent.request("session/fork", { sessionId, cwd: main, mcpServers: [], additionalDirectories: ["/no/such/dir"] }),
      (e) => e.code === -32602 && /additionalDirectories\[0\]/.test(e.message),
    );
    await c.agent.request("session/close", { sessionId });
    await c.agent.request("session/load", { sessionId, cwd: main, mcpServers: [], additionalDirectories: [one] });
    let [r1, r2] = await read(sessionId, [path.join(one, "one.txt"), path.join(two, "two.txt")]);
    assert.match(r1, /first extra/);
    assert.match(r2, /outside the workspace/);
    await c.agent.request("session/resume", { sessionId, cwd: main, mcpServers: [], additionalDirectories: [two] });
    [r1, r2] = await read(sessionId, [path.join(one, "one.txt"), path.join(two, "two.txt")]);
    assert.match(r1, /first extra/);
    assert.match(r2, /second extra/);
    const fork = await c.agent.request("session/fork", { sessionId, cwd: main, mcpServers: [], additionalDirectories: [three] });
    [r1, r2] = await read(fork.sessionId, [path.join(three, "three.txt"), path.join(one, "one.txt")]);
    assert.match(r1, /third extra/);
    assert.match(r2, /outside the workspace/, "the original's loaded roots are not the fork's");
    [r1] = await read(sessionId, [path.join(three, "three.txt")]);
    assert.match(r1, /outside the workspace/, "the fork's roots are not the original's");
  } finally {
    await c.close();
    await server.close();
  }
});
