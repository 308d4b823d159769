// The keybinding tasks as slash commands.
import assert from "node:assert/strict";
import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

import { ModelServer, text, transcript } from "../lib/model_server.mjs";
import { acpTest, checkUpdates, tempDir, until } from "../lib/harness.mjs";

acpTest("tasks are offered as commands, and /explain runs on the lines the prompt carries", async ({ connect }) => {
  const root = tempDir();
  const file = path.join(root, "calc.py");
  writeFileSync(file, "import sys\ndef double(x):\n    return x * 2\nprint(double(21))\n");
  const server = await ModelServer.start();
  const c = await connect(server);
  try {
    const { sessionId } = await c.newSession(root);
    await until(() => c.updatesOf(sessionId, "available_commands_update").length === 1, "the commands");
    const [{ availableCommands }] = c.updatesOf(sessionId, "available_commands_update");
    const names = availableCommands.map((cmd) => cmd.name);
    for (const name of ["fix", "explain", "edit"]) assert.ok(names.includes(name), names.join(","));
    assert.equal(availableCommands.find((cmd) => cmd.name === "explain").description, "Explain");

    server.push(text("It doubles x."));
    const result = await c.agent.request("session/prompt", {
      sessionId,
      prompt: [
        { type: "text", text: "/explain" },
        { type: "resource_link", uri: `${pathToFileURL(file).href}#L2-3`, name: "calc.py" },
      ],
    });
    assert.equal(result.stopReason, "end_turn");
    const [request] = await server.waitForRequests(1);
    const sent = transcript(request);
    assert.match(sent, /Explain what the selected python code in \S*calc.py does/);
    assert.match(sent, /Selected code:\\n```python\\ndef double\(x\):\\n    return x \* 2\\n```/);
    assert.match(sent, /lines 2-3 of/, "the lines the link names");
    assert.equal(
      c.updatesOf(sessionId, "agent_message_chunk").map((u) => u.content.text).join(""),
      "It doubles x.",
    );

    // Not a task: an ordinary prompt.
    server.push(text("No such command."));
    await c.prompt(sessionId, "/nope what");
    const requests = await server.waitForRequests(2);
    assert.match(transcript(requests[1]), /\/nope what/);

    // CodeCompanion's shape: the shared file first, as text, then the
    // command; no file attached. The task runs as an ordinary turn on the
    // text the prompt carries.
    server.push(text("It prints 42."));
    const shared = await c.agent.request("session/prompt", {
      sessionId,
      prompt: [
        { type: "text", text: "calc.py:\nprint(double(21))" },
        { type: "text", text: "/explain briefly" },
      ],
    });
    assert.equal(shared.stopReason, "end_turn");
    const third = transcript((await server.waitForRequests(3))[2]);
    assert.match(third, /Explain what the selected code in the text the user gave does/);
    assert.match(third, /```\\ncalc.py:\\nprint\(double\(21\)\)\\n```/);
    assert.match(third, /The user adds: briefly/);
    assert.doesNotMatch(third, /\/explain/, "the command itself is not sent as text");

    // A bare command: an ordinary turn of the task, not an error.
    server.push(text("Which code?"));
    assert.equal((await c.prompt(sessionId, "/explain")).stopReason, "end_turn");
    const fourth = transcript((await server.waitForRequests(4))[3]);
    assert.match(fourth, /no code was attached/);
    checkUpdates(c.received);
  } finally {
    await c.close();
    await server.close();
  }
});

acpTest("a task of the project's .tandem/config.toml is a command too", async ({ connect }) => {
  const root = tempDir();
  mkdirSync(path.join(root, ".tandem"));
  writeFileSync(
    path.join(root, ".tandem/config.toml"),
    '[tasks.summarize]\ntitle = "Summarize"\nkind = "refactor.rewrite"\nedit = "none"\nwhen = "selection"\nprompt = "Summarize {file} in one line:\\n{selection}"\n',
  );
  const file = path.join(root, "notes.md");
  writeFileSync(file, "# Notes\nShip on Friday.\n");
  const server = await ModelServer.start();
  const c = await connect(server);
  try {
    const { sessionId } = await c.newSession(root);
    await until(() => c.updatesOf(sessionId, "available_commands_update").length === 1, "the commands");
    const [{ availableCommands }] = c.updatesOf(sessionId, "available_commands_update");
    const summarize = availableCommands.find((cmd) => cmd.name === "summarize");
    assert.ok(summarize, availableCommands.map((cmd) => cmd.name).join(","));
    assert.equal(summarize.description, "Summarize");

    server.push(text("Ship Friday."));
    const result = await c.agent.request("session/prompt", {
      sessionId,
      prompt: [
        { type: "text", text: "/summarize" },
        { type: "resource", resource: { uri: pathToFileURL(file).href, text: "# Notes\nShip on Friday.\n", mimeType: "text/markdown" } },
      ],
    });
    assert.equal(result.stopReason, "end_turn");
    const [request] = await server.waitForRequests(1);
    assert.match(transcript(request), /Summarize notes.md in one line:/);
    assert.match(transcript(request), /Ship on Friday/);
  } finally {
    await c.close();
    await server.close();
  }
});
