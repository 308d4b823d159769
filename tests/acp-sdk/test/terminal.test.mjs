// exec_command in the client's terminal: terminal/create, the terminal in
// the tool call's content, wait_for_exit, output, release; kill on cancel
// and on timeout. A client's terminal cannot be sandboxed, so it is used
// only for unconfined runs (here: `[sandbox] mode = "off"` in the user's
// config); with the sandbox on, commands run confined in the daemon.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";

import { ModelServer, text, toolCalls, transcript } from "../lib/model_server.mjs";
import { acpTest, checkUpdates, tempDir, until } from "../lib/harness.mjs";

function killGroup(term) {
  try {
    process.kill(-term.child.pid, "SIGKILL");
  } catch {
    // Already gone.
  }
}

/** A client terminal: real processes, their output kept to the limit. */
function terminals() {
  const calls = [];
  const live = new Map();
  let next = 1;
  const handlers = {
    "terminal/create": ({ params }) => {
      calls.push(["create", params]);
      const id = `term-${next++}`;
      // Its own process group, so a kill reaches the shell's children too.
      const child = spawn(params.command, params.args ?? [], { cwd: params.cwd ?? undefined, detached: true });
      const term = { child, output: "", truncated: false, exit: null, exited: null };
      term.exited = new Promise((resolve) =>
        child.on("exit", (code, signal) => {
          term.exit = { exitCode: code, signal };
          resolve(term.exit);
        }),
      );
      const take = (data) => {
        term.output += data.toString();
        const limit = params.outputByteLimit;
        if (limit && Buffer.byteLength(term.output) > limit) {
          term.output = term.output.slice(-limit);
          term.truncated = true;
        }
      };
      child.stdout.on("data", take);
      child.stderr.on("data", take);
      live.set(id, term);
      return { terminalId: id };
    },
    "terminal/output": ({ params }) => {
      calls.push(["output", params]);
      const term = live.get(params.terminalId);
      return { output: term.output, truncated: term.truncated, exitStatus: term.exit };
    },
    "terminal/wait_for_exit": async ({ params }) => {
      calls.push(["wait_for_exit", params]);
      return live.get(params.terminalId).exited;
    },
    "terminal/kill": ({ params }) => {
      calls.push(["kill", params]);
      killGroup(live.get(params.terminalId));
      return {};
    },
    "terminal/release": ({ params }) => {
      calls.push(["release", params]);
      const term = live.get(params.terminalId);
      if (term.exit === null) killGroup(term);
      live.delete(params.terminalId);
      return {};
    },
  };
  return { calls, live, handlers, kinds: () => calls.map(([k]) => k) };
}

async function session(connect, server, term, { sandbox = "off" } = {}) {
  const home = tempDir("tandem-home-");
  writeFileSync(path.join(home, "config.toml"), `[sandbox]\nmode = "${sandbox}"\n`);
  const c = await connect(server, { home, handlers: term.handlers, capabilities: { terminal: true } });
  const close = c.close.bind(c);
  c.close = async () => {
    await close();
    rmSync(home, { recursive: true, force: true });
  };
  const root = tempDir();
  const { sessionId } = await c.newSession(root);
  await c.agent.request("session/set_mode", { sessionId, modeId: "auto" });
  return { c, root, sessionId };
}

acpTest("a command runs in the client's terminal, shown in the tool call, its output to the model", async ({ connect }) => {
  const server = await ModelServer.start();
  const term = terminals();
  const { c, root, sessionId } = await session(connect, server, term);
  try {
    server.push(toolCalls([["t1", "exec_command", { cmd: "echo from-the-terminal; touch ran; exit 3" }]]), text("Ran."));
    assert.equal((await c.prompt(sessionId, "run it")).stopReason, "end_turn");
    assert.deepEqual(term.kinds(), ["create", "wait_for_exit", "output", "release"]);
    const [, create] = term.calls[0];
    assert.equal(create.sessionId, sessionId);
    assert.equal(create.cwd, root);
    assert.equal(create.outputByteLimit, 32 * 1024);
    assert.ok(existsSync(path.join(root, "ran")), "the client ran it");
    const shown = c.updatesOf(sessionId, "tool_call_update").flatMap((u) => u.content ?? []);
    assert.ok(shown.some((x) => x.type === "terminal" && x.terminalId === "term-1"));
    const requests = await server.waitForRequests(2);
    assert.match(transcript(requests[1]), /exit code 3\\nfrom-the-terminal/);
    assert.equal(term.live.size, 0, "released");
    checkUpdates(c.received);
  } finally {
    await c.close();
    await server.close();
  }
});

acpTest("session/cancel kills the command in the client's terminal and releases it", async ({ connect }) => {
  const server = await ModelServer.start();
  const term = terminals();
  const { c, sessionId } = await session(connect, server, term);
  try {
    server.push(toolCalls([["t1", "exec_command", { cmd: "sleep 30" }]]));
    const prompt = c.prompt(sessionId, "wait");
    await until(() => term.kinds().includes("wait_for_exit"), "the command to start");
    await c.agent.notify("session/cancel", { sessionId });
    assert.equal((await prompt).stopReason, "cancelled");
    await until(() => term.kinds().includes("release"), "the release");
    assert.deepEqual(term.kinds(), ["create", "wait_for_exit", "kill", "output", "release"]);
    assert.ok(c.received.some((m) => m.method === "$/cancel_request"), "wait_for_exit withdrawn");
  } finally {
    await c.close();
    await server.close();
  }
});

acpTest("the timeout still holds in the client's terminal", async ({ connect }) => {
  const server = await ModelServer.start();
  const term = terminals();
  const { c, sessionId } = await session(connect, server, term);
  try {
    server.push(toolCalls([["t1", "exec_command", { cmd: "echo started; sleep 30", timeout_ms: 300 }]]), text("Too slow."));
    assert.equal((await c.prompt(sessionId, "wait")).stopReason, "end_turn");
    assert.deepEqual(term.kinds(), ["create", "wait_for_exit", "kill", "output", "release"]);
    const requests = await server.waitForRequests(2);
    assert.match(transcript(requests[1]), /killed after timeout of 300ms/);
  } finally {
    await c.close();
    await server.close();
  }
});

acpTest("with the sandbox on, a command runs confined in the daemon, not in the client's terminal", async ({ connect }) => {
  const server = await ModelServer.start();
  const term = terminals();
  const { c, root, sessionId } = await session(connect, server, term, { sandbox: "workspace-write" });
  try {
    server.push(toolCalls([["t1", "exec_command", { cmd: "echo confined; touch ran" }]]), text("Ran."));
    assert.equal((await c.prompt(sessionId, "run it")).stopReason, "end_turn");
    assert.deepEqual(term.kinds(), [], "the client's terminal was not used");
    assert.ok(existsSync(path.join(root, "ran")), "the daemon ran it");
    const requests = await server.waitForRequests(2);
    assert.match(transcript(requests[1]), /exit code 0\\nconfined/);
  } finally {
    await c.close();
    await server.close();
  }
});
