// request_user_input as elicitation/create: answered, declined, cancelled
// by the client, withdrawn by session/cancel; not offered without the
// capability.
import assert from "node:assert/strict";

import { ModelServer, text, toolCalls, toolNames, transcript } from "../lib/model_server.mjs";
import { acpTest, checkUpdates, tempDir, until } from "../lib/harness.mjs";

const QUESTIONS = {
  questions: [
    { id: "db", question: "Which database?", options: [{ label: "sqlite" }, { label: "postgres", description: "a server" }] },
  ],
};

async function withClient(connect, handler, run) {
  const server = await ModelServer.start();
  const asked = [];
  const c = await connect(server, {
    handlers: {
      "elicitation/create": async (ctx) => {
        asked.push(ctx.params);
        return handler(ctx);
      },
    },
    capabilities: { elicitation: { form: {} } },
  });
  try {
    const { sessionId } = await c.newSession(tempDir());
    await run({ server, c, sessionId, asked });
  } finally {
    await c.close();
    await server.close();
  }
}

acpTest("an answered question reaches the model, asked as a form with the options as enum", async ({ connect }) => {
  await withClient(
    connect,
    () => ({ action: "accept", content: { db: "postgres" } }),
    async ({ server, c, sessionId, asked }) => {
      server.push(toolCalls([["q1", "request_user_input", QUESTIONS]]), text("Postgres it is."));
      assert.equal((await c.prompt(sessionId, "set up a db")).stopReason, "end_turn");
      const requests = await server.waitForRequests(2);
      assert.ok(toolNames(requests[0]).includes("request_user_input"));
      assert.equal(asked.length, 1);
      const form = asked[0];
      assert.equal(form.mode, "form");
      assert.equal(form.sessionId, sessionId);
      assert.equal(form.toolCallId, "q1");
      assert.deepEqual(form.requestedSchema.required, ["db"]);
      assert.deepEqual(form.requestedSchema.properties.db.enum, ["sqlite", "postgres"]);
      assert.equal(form.requestedSchema.properties.db.title, "Which database?");
      assert.match(transcript(requests[1]), /The user answered: \{\\"db\\":\\"postgres\\"\}/);
      checkUpdates(c.received);
    },
  );
});

acpTest("a declined question tells the model the user declined", async ({ connect }) => {
  await withClient(
    connect,
    () => ({ action: "decline" }),
    async ({ server, c, sessionId }) => {
      server.push(toolCalls([["q1", "request_user_input", QUESTIONS]]), text("OK."));
      assert.equal((await c.prompt(sessionId, "set up a db")).stopReason, "end_turn");
      const requests = await server.waitForRequests(2);
      assert.match(transcript(requests[1]), /The user declined to answer/);
    },
  );
});

acpTest("a question the client cancels tells the model it went unanswered", async ({ connect }) => {
  await withClient(
    connect,
    () => ({ action: "cancel" }),
    async ({ server, c, sessionId }) => {
      server.push(toolCalls([["q1", "request_user_input", QUESTIONS]]), text("OK."));
      assert.equal((await c.prompt(sessionId, "set up a db")).stopReason, "end_turn");
      const requests = await server.waitForRequests(2);
      assert.match(transcript(requests[1]), /the user did not answer/);
    },
  );
});

acpTest("session/cancel withdraws an open question with $/cancel_request and the prompt answers cancelled", async ({ connect }) => {
  let withdrawn = false;
  await withClient(
    connect,
    ({ signal }) =>
      new Promise((_, reject) =>
        signal.addEventListener("abort", () => {
          withdrawn = true;
          reject(signal.reason);
        }),
      ),
    async ({ server, c, sessionId, asked }) => {
      server.push(toolCalls([["q1", "request_user_input", QUESTIONS]]));
      const prompt = c.prompt(sessionId, "set up a db");
      await until(() => asked.length === 1, "the question");
      await c.agent.notify("session/cancel", { sessionId });
      assert.equal((await prompt).stopReason, "cancelled");
      await until(() => withdrawn, "the SDK to abort the elicitation on $/cancel_request");
      const cancel = c.received.find((m) => m.method === "$/cancel_request");
      assert.ok(cancel, "ACP's spelling, not $/cancelRequest");
      const elicitation = c.received.find((m) => m.method === "elicitation/create");
      assert.deepEqual(cancel.params, { requestId: elicitation.id });
      assert.ok(!c.received.some((m) => m.method === "$/cancelRequest"));
      // The prompt's response comes after the last update of the turn.
      const promptRequest = c.sent.find((m) => m.method === "session/prompt");
      const responseAt = c.received.findIndex((m) => m.id === promptRequest.id && !("method" in m));
      const lastUpdateAt = c.received.findLastIndex((m) => m.method === "session/update");
      assert.ok(lastUpdateAt < responseAt);
    },
  );
});

acpTest("without elicitation.form the question tool is not offered", async ({ connect }) => {
  const server = await ModelServer.start();
  const c = await connect(server, { capabilities: {} });
  try {
    const { sessionId } = await c.newSession(tempDir());
    server.push(text("Hi."));
    await c.prompt(sessionId, "hello");
    const [request] = await server.waitForRequests(1);
    assert.ok(!toolNames(request).includes("request_user_input"), toolNames(request).join(","));
    assert.ok(toolNames(request).includes("read_file"));
  } finally {
    await c.close();
    await server.close();
  }
});
