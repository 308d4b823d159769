// What real ACP clients hit in a permission request (issue 29): every
// option has a kind of its own (clients bind their keys by kind), and the
// request's toolCall carries what is approved — the command, the diff — so
// a client that kept no earlier update still shows it.
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import path from "node:path";

import { ModelServer, text, toolCalls } from "../lib/model_server.mjs";
import { acpTest, schema, tempDir } from "../lib/harness.mjs";

function kinds(request) {
  return request.options.map((o) => o.kind);
}

acpTest("a permission request has one option per kind and carries the command and the diff", async ({ connect }) => {
  const root = tempDir();
  const asked = [];
  const server = await ModelServer.start();
  const c = await connect(server, {
    handlers: {
      "session/request_permission": ({ params }) => {
        asked.push(params);
        // Pick by kind, as CodeCompanion's Accept does.
        const allow = params.options.find((o) => o.kind === "allow_once");
        return { outcome: { outcome: "selected", optionId: allow.optionId } };
      },
    },
  });
  try {
    const { sessionId } = await c.newSession(root);
    server.push(toolCalls([["c1", "exec_command", { cmd: "touch asked" }]]), text("Made."));
    assert.equal((await c.prompt(sessionId, "make a file")).stopReason, "end_turn");
    server.push(
      toolCalls([["c2", "apply_patch", { input: "*** Begin Patch\n*** Add File: added.txt\n+hello\n*** End Patch" }]]),
      text("Patched."),
    );
    assert.equal((await c.prompt(sessionId, "add a file")).stopReason, "end_turn");

    assert.equal(asked.length, 2);
    for (const request of asked) {
      schema.zRequestPermissionRequest.parse(request);
      assert.equal(new Set(kinds(request)).size, kinds(request).length, JSON.stringify(request.options));
      assert.ok(!request.options.some((o) => /sandbox/i.test(o.name)), JSON.stringify(request.options));
    }
    assert.deepEqual(kinds(asked[0]), ["allow_once", "allow_always", "reject_once", "reject_always"]);
    // The command, in the request itself.
    assert.deepEqual(asked[0].toolCall.content, [{ type: "content", content: { type: "text", text: "$ touch asked" } }]);
    assert.ok(existsSync(path.join(root, "asked")), "the allowed command ran");
    // The patch's diff, in the request itself (ACP has no workspace edits).
    const [diff] = asked[1].toolCall.content;
    assert.equal(diff.type, "diff");
    assert.equal(diff.path, path.join(root, "added.txt"));
    assert.equal(diff.newText, "hello\n");
    assert.ok(existsSync(path.join(root, "added.txt")), "the allowed patch was written");
  } finally {
    await c.close();
    await server.close();
  }
});
