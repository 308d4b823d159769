// ACP's `messageId` (issue 29): every agent_message_chunk and
// agent_thought_chunk of one message shares an id, each message has its
// own, and a later run's session/load names the user's messages and the
// agent's as the live stream did.
import assert from "node:assert/strict";

import { ModelServer, text } from "../lib/model_server.mjs";
import { acpTest, checkUpdates, tempDir } from "../lib/harness.mjs";

/** Reasoning pieces, then text pieces (OpenAI's `reasoning_content`). */
function reasoningThenText(reasoning, answer) {
  const chunk = (delta, finish_reason = null) => ({
    id: "chatcmpl-scripted",
    object: "chat.completion.chunk",
    created: 0,
    model: "scripted-model",
    choices: [{ index: 0, delta, finish_reason }],
  });
  return {
    events: [
      chunk({ role: "assistant", content: null }),
      ...reasoning.map((r) => chunk({ reasoning_content: r })),
      ...answer.map((t) => chunk({ content: t })),
      chunk({}, "stop"),
      "[DONE]",
    ],
  };
}

/** `[kind, messageId]` of each message chunk, consecutive repeats folded. */
function messages(updates) {
  const out = [];
  for (const u of updates) {
    if (!u.sessionUpdate.endsWith("_chunk")) continue;
    const last = out.at(-1);
    if (!last || last[0] !== u.sessionUpdate || last[1] !== u.messageId) out.push([u.sessionUpdate, u.messageId]);
  }
  return out;
}

acpTest("message chunks carry ids that a later run's session/load repeats", async ({ connect }) => {
  const home = tempDir("tandem-home-");
  const project = tempDir();
  const server = await ModelServer.start();
  let live;
  let sessionId;
  try {
    const first = await connect(server, { home });
    try {
      ({ sessionId } = await first.newSession(project));
      server.push(reasoningThenText(["let me ", "think"], ["Hel", "lo"]));
      assert.equal((await first.prompt(sessionId, "hi")).stopReason, "end_turn");
      server.push(text("again"));
      assert.equal((await first.prompt(sessionId, "once more")).stopReason, "end_turn");
      checkUpdates(first.received);
      const updates = first.updatesOf(sessionId);
      for (const u of updates.filter((u) => u.sessionUpdate.endsWith("_chunk"))) {
        assert.equal(typeof u.messageId, "string", `a chunk without messageId: ${JSON.stringify(u)}`);
      }
      live = messages(updates);
      assert.deepEqual(live, [
        ["agent_thought_chunk", "t1-1-1-thought"],
        ["agent_message_chunk", "t1-1-1"],
        ["agent_message_chunk", "t2-1-1"],
      ]);
      assert.ok(first.updatesOf(sessionId, "agent_message_chunk").length >= 3, "several chunks share an id");
    } finally {
      await first.close();
    }

    const second = await connect(server, { home });
    try {
      await second.agent.request("session/load", { sessionId, cwd: project, mcpServers: [] });
      checkUpdates(second.received);
      assert.deepEqual(messages(second.updatesOf(sessionId)), [
        ["user_message_chunk", "m1"],
        ...live.slice(0, 2),
        ["user_message_chunk", "m2"],
        live[2],
      ]);
    } finally {
      await second.close();
    }
  } finally {
    await server.close();
  }
});
