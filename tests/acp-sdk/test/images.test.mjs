// Images in prompts through the official SDK: the agent advertises
// promptCapabilities.image, an image block reaches the model server as a
// Chat Completions image_url part, and an image over the default 5 MiB cap
// is refused with -32602 and nothing sent.
import assert from "node:assert/strict";

import { ModelServer, text } from "../lib/model_server.mjs";
import { acpTest, schema, tempDir } from "../lib/harness.mjs";

function png(size) {
  const bytes = Buffer.alloc(size, 7);
  Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]).copy(bytes);
  return bytes.toString("base64");
}

function imagePrompt(sessionId, data) {
  return {
    sessionId,
    prompt: [
      { type: "text", text: "what is in this picture?" },
      { type: "image", mimeType: "image/png", data },
    ],
  };
}

acpTest("an image reaches the model server as an image part; an oversize one is refused with nothing sent", async ({ connect }) => {
  const server = await ModelServer.start();
  const c = await connect(server);
  try {
    schema.zInitializeResponse.parse(c.init);
    assert.equal(c.init.agentCapabilities.promptCapabilities.image, true);
    const session = await c.newSession(tempDir());

    const data = png(3000);
    server.push(text("a grey square"));
    const answer = await c.agent.request("session/prompt", imagePrompt(session.sessionId, data));
    assert.equal(answer.stopReason, "end_turn");
    const [request] = await server.waitForRequests(1);
    const user = request.body.messages.findLast((m) => m.role === "user");
    assert.deepEqual(user.content, [
      { type: "text", text: "what is in this picture?" },
      { type: "image_url", image_url: { url: `data:image/png;base64,${data}` } },
    ]);

    await assert.rejects(
      c.agent.request("session/prompt", imagePrompt(session.sessionId, png(5 * 1024 * 1024 + 1))),
      (e) => e.code === -32602 && /over the 5\.0 MB limit/.test(e.message) && /nothing was sent/.test(e.message),
    );
    assert.equal(server.requests.length, 1, "nothing reached the model server");
  } finally {
    await c.close();
    await server.close();
  }
});
