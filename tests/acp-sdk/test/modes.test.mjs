// Approval modes as session modes and a config option; permission and its
// withdrawal on cancel; plans.
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import path from "node:path";

import { hang, ModelServer, text, toolCalls, toolNames } from "../lib/model_server.mjs";
import { acpTest, checkUpdates, schema, tempDir, until } from "../lib/harness.mjs";

acpTest("switching to auto makes commands run without asking; read-only stops offering them", async ({ connect }) => {
  const root = tempDir();
  const asked = [];
  const server = await ModelServer.start();
  const c = await connect(server, {
    handlers: {
      "session/request_permission": ({ params }) => {
        asked.push(params);
        return { outcome: { outcome: "selected", optionId: "allow_once" } };
      },
    },
  });
  try {
    const { sessionId } = await c.newSession(root);
    server.push(toolCalls([["c1", "exec_command", { cmd: "touch asked" }]]), text("Made."));
    assert.equal((await c.prompt(sessionId, "make a file")).stopReason, "end_turn");
    assert.equal(asked.length, 1, "review mode asks");
    assert.equal(asked[0].toolCall.toolCallId, "c1");
    assert.ok(existsSync(path.join(root, "asked")));

    const setMode = await c.agent.request("session/set_mode", { sessionId, modeId: "auto" });
    schema.zSetSessionModeResponse.parse(c.rawResponse("session/set_mode").result);
    assert.deepEqual(setMode, {});
    await until(() => c.updatesOf(sessionId, "current_mode_update").length === 1, "current_mode_update");
    assert.equal(c.updatesOf(sessionId, "current_mode_update")[0].currentModeId, "auto");
    await until(() => c.updatesOf(sessionId, "config_option_update").length === 1, "config_option_update");
    assert.equal(c.updatesOf(sessionId, "config_option_update")[0].configOptions[0].currentValue, "auto");

    server.push(toolCalls([["c2", "exec_command", { cmd: "touch unasked" }]]), text("Made."));
    assert.equal((await c.prompt(sessionId, "make another")).stopReason, "end_turn");
    assert.equal(asked.length, 1, "auto mode does not ask");
    assert.ok(existsSync(path.join(root, "unasked")));

    const set = await c.agent.request("session/set_config_option", { sessionId, configId: "mode", value: "read-only" });
    schema.zSetSessionConfigOptionResponse.parse(set);
    assert.equal(set.configOptions[0].currentValue, "read-only");
    server.push(text("I only read."));
    await c.prompt(sessionId, "what can you do");
    const requests = await server.waitForRequests(5);
    const offered = toolNames(requests[4]);
    assert.ok(!offered.includes("exec_command") && !offered.includes("apply_patch"), offered.join(","));
    assert.ok(offered.includes("read_file"));

    await assert.rejects(
      c.agent.request("session/set_mode", { sessionId, modeId: "yolo" }),
      (e) => e.code === -32602 && /yolo/.test(e.message),
    );
    await assert.rejects(
      c.agent.request("session/set_config_option", { sessionId, configId: "model", value: "x" }),
      (e) => e.code === -32602,
    );
    checkUpdates(c.received);
  } finally {
    await c.close();
    await server.close();
  }
});

acpTest("session/cancel withdraws an open permission request and the prompt answers cancelled", async ({ connect }) => {
  let withdrawn = false;
  let asked = 0;
  const server = await ModelServer.start();
  const c = await connect(server, {
    handlers: {
      "session/request_permission": ({ signal }) => {
        asked += 1;
        return new Promise((_, reject) =>
          signal.addEventListener("abort", () => {
            withdrawn = true;
            reject(signal.reason);
          }),
        );
      },
    },
  });
  try {
    const root = tempDir();
    const { sessionId } = await c.newSession(root);
    server.push(toolCalls([["c1", "exec_command", { cmd: "touch never" }]]));
    const prompt = c.prompt(sessionId, "make a file");
    await until(() => asked === 1, "the permission request");
    await c.agent.notify("session/cancel", { sessionId });
    assert.equal((await prompt).stopReason, "cancelled");
    await until(() => withdrawn, "the withdrawal of the permission request");
    assert.ok(!existsSync(path.join(root, "never")));
  } finally {
    await c.close();
    await server.close();
  }
});

acpTest("session/cancel during streaming answers cancelled", async ({ connect }) => {
  const server = await ModelServer.start();
  const c = await connect(server);
  try {
    const { sessionId } = await c.newSession(tempDir());
    server.push(hang());
    const prompt = c.prompt(sessionId, "think hard");
    await until(() => c.updatesOf(sessionId, "agent_message_chunk").length > 0, "the first chunk");
    await c.agent.notify("session/cancel", { sessionId });
    assert.equal((await prompt).stopReason, "cancelled");
  } finally {
    await c.close();
    await server.close();
  }
});

acpTest("update_plan is an ACP plan update", async ({ connect }) => {
  const server = await ModelServer.start();
  const c = await connect(server);
  try {
    const { sessionId } = await c.newSession(tempDir());
    server.push(
      toolCalls([["p1", "update_plan", { plan: [{ step: "Read the code", status: "completed" }, { step: "Fix it", status: "in_progress" }] }]]),
      text("Planned."),
    );
    await c.prompt(sessionId, "plan it");
    const [plan] = c.updatesOf(sessionId, "plan");
    assert.deepEqual(
      plan.entries.map((e) => [e.content, e.status]),
      [["Read the code", "completed"], ["Fix it", "in_progress"]],
    );
    checkUpdates(c.received);
  } finally {
    await c.close();
    await server.close();
  }
});
