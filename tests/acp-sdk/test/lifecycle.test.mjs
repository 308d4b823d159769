// Session titles (session_info_update, session/list), session/close and
// session/delete (issue 29), in `tandem acp` and through the serve.
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import path from "node:path";

import { hang, ModelServer, text } from "../lib/model_server.mjs";
import { acpTest, checkUpdates, schema, tempDir, until } from "../lib/harness.mjs";

acpTest("a session is titled after the first line of its first prompt, sent as session_info_update and listed", async ({ connect }) => {
  const project = tempDir();
  const server = await ModelServer.start();
  const c = await connect(server);
  try {
    const { sessionId } = await c.newSession(project);
    server.push(text("Looking."), text("Again."));
    assert.equal((await c.prompt(sessionId, "\n  Fix the parser\nit drops the last token")).stopReason, "end_turn");
    const infos = c.updatesOf(sessionId, "session_info_update");
    assert.deepEqual(infos.map((u) => u.title), ["Fix the parser"]);
    // Sent before the prompt's answer.
    const infoAt = c.received.findIndex((m) => m.params?.update?.sessionUpdate === "session_info_update");
    const answerAt = c.received.findIndex((m) => m.id === c.sent.find((s) => s.method === "session/prompt").id && !m.method);
    assert.ok(infoAt < answerAt, `${infoAt} < ${answerAt}`);
    // Only the first prompt names the session.
    assert.equal((await c.prompt(sessionId, "and the lexer")).stopReason, "end_turn");
    assert.equal(c.updatesOf(sessionId, "session_info_update").length, 1);
    const listed = await c.agent.request("session/list", { cwd: project });
    assert.equal(listed.sessions[0].title, "Fix the parser");

    const long = (await c.newSession(project)).sessionId;
    server.push(text("ok"));
    await c.prompt(long, "x".repeat(100));
    const [{ title }] = c.updatesOf(long, "session_info_update");
    assert.equal([...title].length, 60);
    assert.ok(title.endsWith("…"), title);
    checkUpdates(c.received);
  } finally {
    await c.close();
    await server.close();
  }
});

acpTest("session/close frees a session and keeps its log; session/delete removes it, refused while a turn runs", async ({ connect }) => {
  const home = tempDir("tandem-home-");
  const project = tempDir();
  const server = await ModelServer.start();
  const c = await connect(server, { home });
  const log = (id) => path.join(home, "sessions", `${id}.jsonl`);
  try {
    const caps = c.init.agentCapabilities.sessionCapabilities;
    assert.deepEqual(caps.close, {});
    assert.deepEqual(caps.delete, {});

    const kept = (await c.newSession(project)).sessionId;
    server.push(text("Kept."));
    await c.prompt(kept, "keep me");
    const busy = (await c.newSession(project)).sessionId;
    server.push(hang());
    const running = c.prompt(busy, "work forever");
    await server.waitForRequests(2);

    // Refused while the turn runs, with tandem's busy code.
    await assert.rejects(c.agent.request("session/delete", { sessionId: busy }), (e) => e.code === -32005 && /cancel/.test(e.message));
    assert.ok(existsSync(log(busy)));

    // Close cancels the turn (its prompt answers `cancelled`) and keeps the log.
    const closed = await c.agent.request("session/close", { sessionId: busy });
    schema.zCloseSessionResponse.parse(closed);
    assert.equal((await running).stopReason, "cancelled");
    assert.ok(existsSync(log(busy)), "a closed session keeps its log");
    // Gone from memory: a prompt now names an unknown session, a load brings it back.
    await assert.rejects(c.prompt(busy, "still there?"), (e) => e.code === -32001);
    await c.agent.request("session/load", { sessionId: busy, cwd: project, mcpServers: [] });
    await until(() => c.updatesOf(busy, "user_message_chunk").length === 1, "the replay");

    // Delete, now idle: the log goes, and the list no longer has it.
    schema.zDeleteSessionResponse.parse(await c.agent.request("session/delete", { sessionId: busy }));
    assert.ok(!existsSync(log(busy)));
    const listed = await c.agent.request("session/list", { cwd: project });
    assert.deepEqual(listed.sessions.map((s) => s.sessionId), [kept]);

    // A session never prompted is dropped on close.
    const unused = (await c.newSession(project)).sessionId;
    assert.ok(existsSync(log(unused)));
    await c.agent.request("session/close", { sessionId: unused });
    assert.ok(!existsSync(log(unused)), "an empty session is dropped on close");

    // Unknown sessions: already closed, already deleted.
    assert.deepEqual(await c.agent.request("session/close", { sessionId: "nosuchsession" }), {});
    assert.deepEqual(await c.agent.request("session/delete", { sessionId: "nosuchsession" }), {});
    assert.ok(existsSync(log(kept)));
  } finally {
    await c.close();
    await server.close();
  }
});
