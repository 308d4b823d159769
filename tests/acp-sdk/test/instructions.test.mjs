// Project instructions through the official SDK: session/new names the
// AGENTS.md files in force under `_meta.tandem.instructions` (a result the
// protocol's schema accepts), and the model reads them in its system prompt.
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import path from "node:path";

import { ModelServer, text } from "../lib/model_server.mjs";
import { acpTest, schema, tempDir } from "../lib/harness.mjs";

acpTest("session/new names the instruction files in _meta and the model reads them", async ({ connect }) => {
  const server = await ModelServer.start();
  const c = await connect(server);
  try {
    const root = tempDir();
    writeFileSync(path.join(root, "AGENTS.md"), "SDK RULE: be kind.\n");
    const session = await c.newSession(root);
    schema.zNewSessionResponse.parse(session);
    const files = session._meta.tandem.instructions;
    assert.deepEqual(files.map((f) => f.path), [path.join(root, "AGENTS.md")]);
    assert.equal(files[0].bytes, 19);
    assert.match(files[0].sha256, /^[0-9a-f]{64}$/);

    server.push(text("ok"));
    await c.prompt(session.sessionId, "hi");
    const [request] = await server.waitForRequests(1);
    assert.equal(request.body.messages[0].role, "system");
    assert.match(request.body.messages[0].content, /SDK RULE: be kind\./);
  } finally {
    await c.close();
    await server.close();
  }
});
