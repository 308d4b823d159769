// initialize, session/new, a streamed turn, and the shapes of the results
// the SDK maps silently.
import assert from "node:assert/strict";

import { ModelServer, text } from "../lib/model_server.mjs";
import { acpTest, checkUpdates, schema, tempDir } from "../lib/harness.mjs";

acpTest("initialize advertises sessions, and session/new reports the modes and config options", async ({ connect }) => {
  const server = await ModelServer.start();
  const c = await connect(server);
  try {
    schema.zInitializeResponse.parse(c.init);
    assert.equal(c.init.protocolVersion, 1);
    assert.equal(c.init.agentCapabilities.loadSession, true);
    assert.deepEqual(c.init.agentCapabilities.sessionCapabilities, { list: {}, resume: {}, close: {}, delete: {}, fork: {}, additionalDirectories: {} });

    const session = await c.newSession(tempDir());
    schema.zNewSessionResponse.parse(session);
    assert.equal(session.modes.currentModeId, "review");
    assert.deepEqual(
      session.modes.availableModes.map((m) => m.id),
      ["read-only", "review", "auto"],
    );
    const [mode] = session.configOptions;
    assert.equal(mode.id, "mode");
    assert.equal(mode.category, "mode");
    assert.equal(mode.currentValue, "review");

    server.push(text("Hel", "lo"));
    const result = await c.prompt(session.sessionId, "hi");
    // The prompt's own message id (ACP's userMessageId, under _meta).
    assert.deepEqual(result, { stopReason: "end_turn", _meta: { tandem: { userMessageId: "m1" } } });
    const chunks = c.updatesOf(session.sessionId, "agent_message_chunk").map((u) => u.content.text);
    assert.equal(chunks.join(""), "Hello");
    // The live prompt is not echoed back (clients would show it as the
    // agent's first line); session/load replays it (sessions.test.mjs).
    assert.deepEqual(c.updatesOf(session.sessionId, "user_message_chunk"), []);
    checkUpdates(c.received);
    const requests = await server.waitForRequests(1);
    assert.match(JSON.stringify(requests[0].body.messages), /hi/);
  } finally {
    await c.close();
    await server.close();
  }
});

acpTest("errors are JSON-RPC errors with specific codes", async ({ connect }) => {
  const server = await ModelServer.start();
  const c = await connect(server);
  try {
    await assert.rejects(c.agent.request("session/new", { cwd: "relative", mcpServers: [] }), (e) => e.code === -32602);
    await assert.rejects(c.prompt("no-such-session", "x"), (e) => e.code === -32001);
    await assert.rejects(c.agent.request("session/load", { sessionId: "nope", cwd: tempDir(), mcpServers: [] }), (e) => e.code === -32001);
    await assert.rejects(c.agent.request("session/list", { cursor: "not-a-cursor" }), (e) => e.code === -32602);
  } finally {
    await c.close();
    await server.close();
  }
});
