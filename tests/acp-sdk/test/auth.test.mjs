// authMethods names the configured model's API-key variable, and
// authenticate says whether it is set; the key never reaches a log or the
// wire (issue 29).
import assert from "node:assert/strict";
import { readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import path from "node:path";

import { ModelServer, text } from "../lib/model_server.mjs";
import { acpTest, schema, tempDir } from "../lib/harness.mjs";

const VAR = "TANDEM_ACP_TEST_MODEL_KEY";
const SECRET = "sk-test-5f1e0c9a-never-logged";

function everyFile(dir) {
  return readdirSync(dir).flatMap((name) => {
    const p = path.join(dir, name);
    return statSync(p).isDirectory() ? everyFile(p) : [p];
  });
}

acpTest("authMethods names the model's key variable and authenticate checks it, never logging the key", async ({ connect }) => {
  const home = tempDir("tandem-home-");
  writeFileSync(path.join(home, "config.toml"), `[model]\napi_key_env = "${VAR}"\n`);
  const server = await ModelServer.start();
  try {
    // Without the variable: the method is advertised, authenticate says what to set.
    delete process.env[VAR];
    const bare = await connect(server, { home });
    try {
      schema.zInitializeResponse.parse(bare.init);
      const raw = bare.rawResponse("initialize").result.authMethods;
      assert.equal(raw.length, 1);
      assert.equal(raw[0].id, "api-key");
      assert.match(raw[0].name, new RegExp(VAR));
      assert.match(raw[0].description, new RegExp(`environment variable ${VAR}`));
      await assert.rejects(
        bare.agent.request("authenticate", { methodId: "api-key" }),
        (e) => e.code === -32000 && e.message.includes(`${VAR} is not set`),
      );
      await assert.rejects(bare.agent.request("authenticate", { methodId: "oauth" }), (e) => e.code === -32602);
    } finally {
      await bare.close();
    }

    // With it: authenticated, and a turn uses the key without it being kept.
    process.env[VAR] = SECRET;
    const c = await connect(server, { home });
    try {
      assert.deepEqual(await c.agent.request("authenticate", { methodId: "api-key" }), {});
      const { sessionId } = await c.newSession(tempDir());
      server.push(text("Hi."));
      await c.prompt(sessionId, "hello");
      const [request] = await server.waitForRequests(1);
      assert.equal(request.path, "/v1/chat/completions");
    } finally {
      await c.close();
    }
    assert.ok(!JSON.stringify(c.received).includes(SECRET), "the key went over the wire");
    for (const file of everyFile(home)) {
      if (file.endsWith(".sock")) continue;
      assert.ok(!readFileSync(file, "utf8").includes(SECRET), `the key is in ${file}`);
    }
  } finally {
    delete process.env[VAR];
    await server.close();
  }
});
