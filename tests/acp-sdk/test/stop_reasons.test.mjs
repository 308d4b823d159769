// tandem's stop reasons mapped onto ACP's, with tandem's own in _meta.
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import path from "node:path";

import { ModelServer, text, toolCalls } from "../lib/model_server.mjs";
import { acpTest, schema, tempDir } from "../lib/harness.mjs";

acpTest("a detected loop ends as max_turn_requests with loop_detected in _meta", async ({ connect }) => {
  const root = tempDir();
  writeFileSync(path.join(root, "a.txt"), "a\n");
  const server = await ModelServer.start();
  const c = await connect(server);
  try {
    const { sessionId } = await c.newSession(root);
    for (let i = 0; i < 3; i++) server.push(toolCalls([[`c${i}`, "read_file", { path: "a.txt" }]]));
    const result = await c.prompt(sessionId, "read it forever");
    schema.zPromptResponse.parse(result);
    assert.deepEqual(result, { stopReason: "max_turn_requests", _meta: { tandem: { stopReason: "loop_detected", userMessageId: "m1" } } });
  } finally {
    await c.close();
    await server.close();
  }
});

acpTest("a spent token budget ends as max_tokens with token_budget in _meta", async ({ connect }) => {
  const root = tempDir();
  writeFileSync(path.join(root, "a.txt"), "a\n");
  const home = tempDir("tandem-home-");
  writeFileSync(path.join(home, "config.toml"), "[limits]\nmax_tokens = 1\n");
  const server = await ModelServer.start();
  const c = await connect(server, { home });
  try {
    const { sessionId } = await c.newSession(root);
    server.push(toolCalls([["c1", "read_file", { path: "a.txt" }]]), text("never reached"));
    const result = await c.prompt(sessionId, "read it");
    assert.deepEqual(result, { stopReason: "max_tokens", _meta: { tandem: { stopReason: "token_budget", userMessageId: "m1" } } });
    assert.equal(server.requests.length, 1, "no model call after the budget ran out");
  } finally {
    await c.close();
    await server.close();
  }
});
