// ACP's session/fork (unstable; advertised as sessionCapabilities.fork):
// the fork's history is the original's before the user message that
// `_meta.tandem.messageId` names (all of it without one), its session/load
// replays the original's up to there, the model hears only that history,
// and the original goes on untouched.
import assert from "node:assert/strict";
import path from "node:path";
import { fileURLToPath } from "node:url";

import { ModelServer, text, transcript } from "../lib/model_server.mjs";
import { acpTest, checkUpdates, tempDir } from "../lib/harness.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const unstable = await import(
  path.join(here, "../node_modules/@agentclientprotocol/sdk/dist/v1/unstable/schema/zod.gen.js")
);

/** A session's updates from `from` on, as a replay must repeat them. */
function shown(updates) {
  return updates.map((u) => JSON.stringify(u));
}

acpTest("session/fork at a user message and whole, each loaded and prompted", async ({ connect }) => {
  const project = tempDir();
  const server = await ModelServer.start();
  const c = await connect(server);
  try {
    assert.deepEqual(c.init.agentCapabilities.sessionCapabilities.fork, {});
    const { sessionId } = await c.newSession(project);
    server.push(text("one"), text("two"));
    assert.equal((await c.prompt(sessionId, "first")).stopReason, "end_turn");
    const second = await c.prompt(sessionId, "second");
    assert.equal(second._meta.tandem.userMessageId, "m2", "the prompt's id, to fork at");

    // The user's message ids, from a replay of the original.
    const before = c.updates.length;
    await c.agent.request("session/load", { sessionId, cwd: project, mcpServers: [] });
    const original = c.updates.slice(before).filter((u) => u.sessionId === sessionId).map((u) => u.update);
    const users = original.filter((u) => u.sessionUpdate === "user_message_chunk");
    assert.deepEqual(users.map((u) => u.messageId), ["m1", "m2"]);

    const fork = async (meta) => {
      const params = { sessionId, cwd: project, mcpServers: [], ...(meta ? { _meta: { tandem: meta } } : {}) };
      const forked = await c.agent.request("session/fork", params);
      unstable.zForkSessionResponse.parse(forked);
      assert.notEqual(forked.sessionId, sessionId);
      assert.equal(forked.modes.currentModeId, "review");
      await c.agent.request("session/load", { sessionId: forked.sessionId, cwd: project, mcpServers: [] });
      return [forked.sessionId, c.updatesOf(forked.sessionId).filter((u) => u.sessionUpdate !== "available_commands_update")];
    };
    const withoutCommands = (updates) => updates.filter((u) => u.sessionUpdate !== "available_commands_update");

    const [atM2, replay] = await fork({ messageId: "m2" });
    const m2 = withoutCommands(original).findIndex((u) => u.messageId === "m2");
    assert.deepEqual(shown(replay), shown(withoutCommands(original).slice(0, m2)));
    assert.ok(replay.some((u) => u.sessionUpdate === "agent_message_chunk"));

    const [, all] = await fork(null);
    assert.deepEqual(shown(all), shown(withoutCommands(original)));

    server.push(text("two, again"));
    assert.equal((await c.prompt(atM2, "second, differently")).stopReason, "end_turn");
    const requests = await server.waitForRequests(3);
    const heard = transcript(requests[2]);
    assert.match(heard, /first/);
    assert.match(heard, /one/);
    assert.doesNotMatch(heard, /"second"|"two"/);

    server.push(text("three"));
    assert.equal((await c.prompt(sessionId, "third")).stopReason, "end_turn");
    assert.match(transcript((await server.waitForRequests(4))[3]), /two/, "the original keeps its history");

    await assert.rejects(
      c.agent.request("session/fork", { sessionId, cwd: project, mcpServers: [], _meta: { tandem: { messageId: "m9" } } }),
      (e) => e.code === -32602 && /m9/.test(e.message),
    );
    await assert.rejects(
      c.agent.request("session/fork", { sessionId: "nosuch", cwd: project, mcpServers: [] }),
      (e) => e.code === -32001,
    );
    checkUpdates(c.received);
  } finally {
    await c.close();
    await server.close();
  }
});
