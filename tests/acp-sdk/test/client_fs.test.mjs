// The client's buffers: reads go through fs/read_text_file (so the agent
// sees unsaved text) and accepted edits through fs/write_text_file.
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";

import { ModelServer, text, toolCalls, transcript } from "../lib/model_server.mjs";
import { acpTest, checkUpdates, tempDir } from "../lib/harness.mjs";

const PATCH = "*** Begin Patch\n*** Update File: notes.txt\n@@\n-unsaved line\n+patched line\n*** End Patch";

/** A client with one open, modified buffer for `file`. */
function editor(file, unsaved) {
  const buffers = new Map([[file, unsaved]]);
  const reads = [];
  const writes = [];
  return {
    buffers,
    reads,
    writes,
    handlers: {
      "fs/read_text_file": ({ params }) => {
        reads.push(params);
        if (params.path === "/denied") throw new Error("unreachable");
        if (buffers.has(params.path)) return { content: buffers.get(params.path) };
        return { content: readFileSync(params.path, "utf8") };
      },
      "fs/write_text_file": ({ params }) => {
        writes.push(params);
        buffers.set(params.path, params.content);
        return {};
      },
    },
  };
}

acpTest("read_file sees the client's unsaved buffer and an accepted patch lands in it", async ({ connect }) => {
  const root = tempDir();
  const file = path.join(root, "notes.txt");
  writeFileSync(file, "saved line\n");
  const client = editor(file, "unsaved line\n");
  const server = await ModelServer.start();
  const c = await connect(server, {
    handlers: client.handlers,
    capabilities: { fs: { readTextFile: true, writeTextFile: true } },
  });
  try {
    const { sessionId } = await c.newSession(root);
    await c.agent.request("session/set_mode", { sessionId, modeId: "auto" });
    server.push(
      toolCalls([["c1", "read_file", { path: "notes.txt" }]]),
      toolCalls([["c2", "apply_patch", { input: PATCH }]]),
      text("Done."),
    );
    const result = await c.prompt(sessionId, "fix the note");
    assert.equal(result.stopReason, "end_turn");

    const requests = await server.waitForRequests(3);
    assert.match(transcript(requests[1]), /unsaved line/, "the model got the buffer, not the disk");
    assert.doesNotMatch(transcript(requests[1]), /\\tsaved line/);
    assert.ok(client.reads.every((r) => r.sessionId === sessionId && path.isAbsolute(r.path)));
    assert.deepEqual(
      client.writes.map((w) => [w.sessionId, w.path, w.content]),
      [[sessionId, file, "patched line\n"]],
    );
    assert.equal(readFileSync(file, "utf8"), "saved line\n", "the client owns the write, not the disk");
    assert.match(transcript(requests[2]), /The patch was applied/);
    const diffs = c.updatesOf(sessionId, "tool_call_update").flatMap((u) => u.content ?? []);
    assert.ok(diffs.some((d) => d.type === "diff" && d.path === file && d.oldText === "unsaved line\n"));
    checkUpdates(c.received);
  } finally {
    await c.close();
    await server.close();
  }
});

acpTest("a failing fs/read_text_file is a tool error the model reads, not a hung turn", async ({ connect }) => {
  const root = tempDir();
  const server = await ModelServer.start();
  const c = await connect(server, {
    handlers: {
      "fs/read_text_file": () => {
        throw new Error("buffer is locked");
      },
    },
    capabilities: { fs: { readTextFile: true } },
  });
  try {
    const { sessionId } = await c.newSession(root);
    server.push(toolCalls([["c1", "read_file", { path: "missing.txt" }]]), text("I could not read it."));
    const result = await c.prompt(sessionId, "read it");
    assert.equal(result.stopReason, "end_turn");
    const requests = await server.waitForRequests(2);
    assert.match(transcript(requests[1]), /the editor could not read `missing.txt`/);
    const failed = c.updatesOf(sessionId, "tool_call_update").filter((u) => u.status === "failed");
    assert.equal(failed.length, 1);
  } finally {
    await c.close();
    await server.close();
  }
});

acpTest("in review mode the patch is confirmed with session/request_permission, then written through the client", async ({ connect }) => {
  const root = tempDir();
  const file = path.join(root, "notes.txt");
  writeFileSync(file, "saved line\n");
  const client = editor(file, "unsaved line\n");
  const asked = [];
  const server = await ModelServer.start();
  const c = await connect(server, {
    handlers: {
      ...client.handlers,
      "session/request_permission": ({ params }) => {
        asked.push(params);
        return { outcome: { outcome: "selected", optionId: "allow_once" } };
      },
    },
    capabilities: { fs: { readTextFile: true, writeTextFile: true } },
  });
  try {
    const { sessionId } = await c.newSession(root);
    server.push(toolCalls([["c1", "apply_patch", { input: PATCH }]]), text("Done."));
    assert.equal((await c.prompt(sessionId, "fix")).stopReason, "end_turn");
    assert.equal(asked.length, 1);
    assert.equal(asked[0].toolCall.kind, "edit");
    assert.deepEqual(client.writes.map((w) => w.content), ["patched line\n"]);
    // The waiting state is tandem's: only under _meta.
    const raw = c.received.filter((m) => m.method === "session/update").map((m) => m.params.update);
    assert.ok(raw.every((u) => !("waitingFor" in u) && !("outputDelta" in u)));
    assert.ok(raw.some((u) => u._meta?.tandem?.waitingFor === "permission"));
  } finally {
    await c.close();
    await server.close();
  }
});

acpTest("a failing fs/write_text_file is a tool error that says nothing changed", async ({ connect }) => {
  const root = tempDir();
  const file = path.join(root, "notes.txt");
  writeFileSync(file, "saved line\n");
  const client = editor(file, "unsaved line\n");
  const server = await ModelServer.start();
  const c = await connect(server, {
    handlers: {
      ...client.handlers,
      "fs/write_text_file": () => {
        throw new Error("read-only buffer");
      },
    },
    capabilities: { fs: { readTextFile: true, writeTextFile: true } },
  });
  try {
    const { sessionId } = await c.newSession(root);
    await c.agent.request("session/set_mode", { sessionId, modeId: "auto" });
    server.push(toolCalls([["c1", "apply_patch", { input: PATCH }]]), text("It failed."));
    assert.equal((await c.prompt(sessionId, "fix")).stopReason, "end_turn");
    const requests = await server.waitForRequests(2);
    assert.match(transcript(requests[1]), /the editor could not write `notes.txt`/);
    assert.match(transcript(requests[1]), /The patch was not applied; nothing was changed/);
    assert.equal(readFileSync(file, "utf8"), "saved line\n");
  } finally {
    await c.close();
    await server.close();
  }
});
