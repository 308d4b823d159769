// session/list, session/resume and session/load of sessions written by an
// earlier daemon run.
import assert from "node:assert/strict";
import { readdirSync } from "node:fs";
import path from "node:path";

import { ModelServer, text, transcript } from "../lib/model_server.mjs";
import { acpTest, checkUpdates, schema, tempDir } from "../lib/harness.mjs";

acpTest("an earlier run's sessions are listed by cwd in pages, resumed without replay and loaded with it", async ({ connect }) => {
  const home = tempDir("tandem-home-");
  const project = tempDir();
  const other = tempDir();
  const server = await ModelServer.start();

  try {
    // The earlier run: one session with a turn, 21 more elsewhere, and
    // one never prompted (not listed).
    const first = await connect(server, { home });
    server.push(text("The answer is 42."));
    const { sessionId } = await first.newSession(project);
    assert.equal((await first.prompt(sessionId, "what is the answer")).stopReason, "end_turn");
    const others = [];
    for (let i = 0; i < 21; i++) {
      const id = (await first.newSession(other)).sessionId;
      server.push(text("ok"));
      assert.equal((await first.prompt(id, `question ${i}`)).stopReason, "end_turn");
      others.push(id);
    }
    await first.newSession(other);
    await first.close();

    const second = await connect(server, { home });
    try {
      const mine = await second.agent.request("session/list", { cwd: project });
      schema.zListSessionsResponse.parse(mine);
      assert.equal(mine.sessions.length, 1);
      assert.equal(mine.sessions[0].sessionId, sessionId);
      assert.equal(mine.sessions[0].cwd, project);
      assert.equal(mine.sessions[0].title, "what is the answer");
      assert.ok(mine.sessions[0].updatedAt);
      assert.equal(mine.nextCursor, undefined);

      const page1 = await second.agent.request("session/list", { cwd: other });
      assert.equal(page1.sessions.length, 20);
      assert.ok(page1.nextCursor);
      const page2 = await second.agent.request("session/list", { cwd: other, cursor: page1.nextCursor });
      assert.equal(page2.sessions.length, 1);
      assert.equal(page2.nextCursor, undefined);
      assert.deepEqual(
        [...page1.sessions, ...page2.sessions].map((s) => s.sessionId).sort(),
        [...others].sort(),
      );
      const all = await second.agent.request("session/list", {});
      const rest = await second.agent.request("session/list", { cursor: all.nextCursor });
      assert.equal(all.sessions.length + rest.sessions.length, 22, "without cwd, every session");

      const resumed = await second.agent.request("session/resume", { sessionId, cwd: project, mcpServers: [] });
      schema.zResumeSessionResponse.parse(resumed);
      assert.equal(resumed.modes.currentModeId, "review");
      assert.deepEqual(second.updatesOf(sessionId), [], "resume replays nothing");

      server.push(text("Still 42."));
      assert.equal((await second.prompt(sessionId, "and again?")).stopReason, "end_turn");
      const requests = await server.waitForRequests(23);
      assert.match(transcript(requests[22]), /what is the answer/, "the resumed session keeps its history");
      assert.match(transcript(requests[22]), /The answer is 42/);
    } finally {
      await second.close();
    }

    const third = await connect(server, { home });
    try {
      const loaded = await third.agent.request("session/load", { sessionId, cwd: project, mcpServers: [] });
      const raw = third.rawResponse("session/load");
      assert.notEqual(raw.result, null, "an object, not null");
      schema.zLoadSessionResponse.parse(raw.result);
      assert.equal(loaded.modes.currentModeId, "review");
      const users = third.updatesOf(sessionId, "user_message_chunk").map((u) => u.content.text);
      assert.deepEqual(users, ["what is the answer", "and again?"]);
      const agent = third.updatesOf(sessionId, "agent_message_chunk").map((u) => u.content.text).join("");
      assert.equal(agent, "The answer is 42.Still 42.");
      // The replay comes before the result.
      const resultAt = third.received.indexOf(raw);
      const lastReplayAt = third.received.findLastIndex((m) => m.method === "session/update");
      assert.ok(lastReplayAt < resultAt);
      checkUpdates(third.received);
    } finally {
      await third.close();
    }
  } finally {
    // Even when a step failed: an open server would keep the file running.
    await server.close();
  }
});

acpTest("a session never prompted is not listed, and its log goes when the client does", async ({ connect, mode }) => {
  const home = tempDir("tandem-home-");
  const project = tempDir();
  const server = await ModelServer.start();
  try {
    const c = await connect(server, { home });
    server.push(text("Hi."));
    const used = (await c.newSession(project)).sessionId;
    assert.equal((await c.prompt(used, "hello")).stopReason, "end_turn");
    const unused = (await c.newSession(project)).sessionId;
    const listed = await c.agent.request("session/list", { cwd: project });
    assert.deepEqual(listed.sessions.map((s) => s.sessionId), [used]);
    await c.close();

    const logs = () => readdirSync(path.join(home, "sessions")).filter((f) => f.endsWith(".jsonl"));
    assert.ok(logs().includes(`${used}.jsonl`));
    if (mode === "stdio") {
      // `tandem acp` ended with its client: the unused chat left no log.
      assert.ok(!logs().includes(`${unused}.jsonl`), logs().join(","));
    }
    const again = await connect(server, { home });
    try {
      const relisted = await again.agent.request("session/list", {});
      assert.deepEqual(relisted.sessions.map((s) => s.sessionId), [used]);
    } finally {
      await again.close();
    }
  } finally {
    await server.close();
  }
});
