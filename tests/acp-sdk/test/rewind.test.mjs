// `/rewind`: the list of messages, then a rewind of the files and the
// conversation, said as the agent's text; nothing reaches the model.
import assert from "node:assert/strict";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";

import { ModelServer, text, toolCalls, transcript } from "../lib/model_server.mjs";
import { acpTest, checkUpdates, tempDir, until } from "../lib/harness.mjs";

const PATCH = "*** Begin Patch\n*** Update File: notes.txt\n@@\n-before\n+after\n*** Add File: added.txt\n+new\n*** End Patch";

acpTest("/rewind lists the messages, then rewinds files and conversation to before one", async ({ connect }) => {
  const root = tempDir();
  const notes = path.join(root, "notes.txt");
  writeFileSync(notes, "before\n");
  const server = await ModelServer.start();
  const c = await connect(server);
  try {
    const { sessionId } = await c.newSession(root);
    await until(() => c.updatesOf(sessionId, "available_commands_update").length === 1, "the commands");
    const [{ availableCommands }] = c.updatesOf(sessionId, "available_commands_update");
    assert.ok(availableCommands.some((cmd) => cmd.name === "rewind"));
    await c.agent.request("session/set_mode", { sessionId, modeId: "auto" });

    server.push(text("Hello."));
    await c.prompt(sessionId, "say hello");
    server.push(toolCalls([["c1", "apply_patch", { input: PATCH }]]), text("Patched."));
    await c.prompt(sessionId, "patch the notes");
    assert.equal(readFileSync(notes, "utf8"), "after\n");
    const said = () => c.updatesOf(sessionId, "agent_message_chunk").map((u) => u.content.text).join("");

    const before = said().length;
    assert.equal((await c.prompt(sessionId, "/rewind")).stopReason, "end_turn");
    const list = said().slice(before);
    assert.match(list, /1\. say hello \(m\d+\)/);
    assert.match(list, /2\. patch the notes \(m\d+\)/);

    const mid = said().length;
    assert.equal((await c.prompt(sessionId, "/rewind 2")).stopReason, "end_turn");
    const outcome = said().slice(mid);
    assert.match(outcome, /Rewound \(rw1/);
    assert.match(outcome, /notes\.txt: restored/);
    assert.equal(readFileSync(notes, "utf8"), "before\n");
    assert.ok(!existsSync(path.join(root, "added.txt")));
    assert.equal((await server.waitForRequests(3)).length, 3, "the model was not asked");

    server.push(text("Again."));
    await c.prompt(sessionId, "next try");
    const [, , , fourth] = await server.waitForRequests(4);
    const sent = transcript(fourth);
    assert.match(sent, /say hello/);
    assert.doesNotMatch(sent, /patch the notes/);

    await assert.rejects(c.prompt(sessionId, "/rewind 9"), /no message 9/);
    checkUpdates(c.received);
  } finally {
    await c.close();
    await server.close();
  }
});
