// Models and reasoning effort as session config options (categories
// `model` and `thought_level`), and `usage_update` after every model
// response: what the model server receives and what the client is told.
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import path from "node:path";

import { ModelServer, text } from "../lib/model_server.mjs";
import { acpTest, checkUpdates, schema, tempDir, until } from "../lib/harness.mjs";

/** A home whose config has `fast` beside the default model, with a price. */
function homeWithModels() {
  const home = tempDir("tandem-home-");
  writeFileSync(
    path.join(home, "config.toml"),
    [
      "[model]",
      "context_window = 64000",
      "[models.fast]",
      'name = "fast-model"',
      'efforts = ["low", "high"]',
      "context_window = 32000",
      '[pricing."fast-model"]',
      "input_per_mtok = 1.0",
      "output_per_mtok = 2.0",
      "",
    ].join("\n"),
  );
  return home;
}

const option = (options, id) => options.find((o) => o.id === id);

acpTest("switching the model and effort changes what the model server receives; usage_update follows each response", async ({ connect }) => {
  const server = await ModelServer.start();
  const c = await connect(server, { home: homeWithModels() });
  try {
    const created = await c.newSession(tempDir());
    schema.zNewSessionResponse.parse(c.rawResponse("session/new").result);
    const { sessionId } = created;
    const model = option(created.configOptions, "model");
    assert.equal(model.category, "model");
    assert.equal(model.currentValue, "default");
    assert.deepEqual(model.options.map((o) => o.value), ["default", "fast"]);
    assert.equal(option(created.configOptions, "effort"), undefined, "the default model lists no efforts");

    // The default model: the server's usage, the window, no price.
    server.push(text("one"));
    await c.prompt(sessionId, "hello");
    const [first] = await server.waitForRequests(1);
    assert.equal(first.body.model, "scripted-model");
    assert.equal(first.body.reasoning_effort, undefined);
    const [usage] = c.updatesOf(sessionId, "usage_update");
    assert.equal(usage.used, 10 + 5, "prompt_tokens + completion_tokens");
    assert.equal(usage.size, 64000);
    assert.equal(usage.cost, undefined);

    const set = await c.agent.request("session/set_config_option", { sessionId, configId: "model", value: "fast" });
    schema.zSetSessionConfigOptionResponse.parse(c.rawResponse("session/set_config_option").result);
    assert.equal(option(set.configOptions, "model").currentValue, "fast");
    const effort = option(set.configOptions, "effort");
    assert.equal(effort.category, "thought_level");
    assert.equal(effort.currentValue, "low");
    assert.deepEqual(effort.options.map((o) => o.value), ["low", "high"]);
    assert.equal(option(set.configOptions, "mode").currentValue, "review", "the full set");
    const high = await c.agent.request("session/set_config_option", { sessionId, configId: "effort", value: "high" });
    assert.equal(option(high.configOptions, "effort").currentValue, "high");
    await until(
      () => c.updatesOf(sessionId, "config_option_update").some((u) => option(u.configOptions, "effort")?.currentValue === "high"),
      "the config_option_update of the effort",
    );

    // Unknown values are refused and change nothing.
    await assert.rejects(
      c.agent.request("session/set_config_option", { sessionId, configId: "effort", value: "turbo" }),
      (e) => e.code === -32602 && /effort `turbo`/.test(e.message),
    );
    await assert.rejects(
      c.agent.request("session/set_config_option", { sessionId, configId: "model", value: "huge" }),
      (e) => e.code === -32602 && /unknown model `huge`/.test(e.message),
    );

    server.push(text("two"));
    await c.prompt(sessionId, "again");
    const requests = await server.waitForRequests(2);
    assert.equal(requests[1].body.model, "fast-model");
    assert.equal(requests[1].body.reasoning_effort, "high");
    const last = c.updatesOf(sessionId, "usage_update").at(-1);
    assert.equal(last.used, 15);
    assert.equal(last.size, 32000);
    assert.equal(last.cost.currency, "USD");
    assert.ok(Math.abs(last.cost.amount - (10 * 1 + 5 * 2) / 1e6) < 1e-12, JSON.stringify(last.cost));
    checkUpdates(c.received);
  } finally {
    await c.close();
    await server.close();
  }
});

acpTest("a loaded session keeps its model and effort", async ({ connect }) => {
  const server = await ModelServer.start();
  const home = homeWithModels();
  const root = tempDir();
  let c = await connect(server, { home });
  let sessionId;
  try {
    ({ sessionId } = await c.newSession(root));
    await c.agent.request("session/set_config_option", { sessionId, configId: "model", value: "fast" });
    server.push(text("one"));
    await c.prompt(sessionId, "hello");
  } finally {
    await c.close();
  }
  c = await connect(server, { home });
  try {
    const loaded = await c.agent.request("session/load", { sessionId, cwd: root, mcpServers: [] });
    schema.zLoadSessionResponse.parse(c.rawResponse("session/load").result);
    assert.equal(option(loaded.configOptions, "model").currentValue, "fast");
    assert.equal(option(loaded.configOptions, "effort").currentValue, "low");
    server.push(text("two"));
    await c.prompt(sessionId, "again");
    const requests = await server.waitForRequests(2);
    assert.equal(requests[1].body.model, "fast-model");
    assert.equal(requests[1].body.reasoning_effort, "low");
  } finally {
    await c.close();
    await server.close();
  }
});
