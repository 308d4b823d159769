/**
 * The user's language servers as the agent's eyes, in a real VS Code
 * (code-server) with its built-in TypeScript language features on a small
 * project: `references` returns the TypeScript server's locations, and a
 * patch that introduces an undefined name brings its error to the model's
 * next request, without the error that was there before.
 */
import { after, before, test } from 'node:test';
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { unavailable, Workbench } from './e2e/workbench';
import { ModelServer, text, toolCall, type RecordedRequest } from './support/model_server';

const skip = unavailable();
if (skip) console.log(`e2e: did not run: ${skip}`);

let server: ModelServer;
before(async () => {
  server = await ModelServer.start();
});
after(() => server?.close());

function toolMessages(r: RecordedRequest): string[] {
  return (r.body.messages ?? []).filter((m) => m.role === 'tool').map((m) => String(m.content));
}

const LIB = 'export function greet(name: string): string {\n  return "hi " + name;\n}\n';
// `oldMistake` is wrong before the patch: not news afterwards.
const APP = 'import { greet } from "./lib";\n\nconsole.log(greet("x"));\nconsole.log(oldMistake);\n';
const PATCH = '*** Begin Patch\n*** Update File: app.ts\n@@\n-console.log(greet("x"));\n+console.log(greet(missingName));\n*** End Patch';

test('TypeScript: references are the server\'s, and a patch\'s new error reaches the model', { skip, timeout: 240_000 }, async (t) => {
  const wb = new Workbench(server);
  try {
    wb.write('tsconfig.json', '{ "compilerOptions": { "strict": true, "target": "es2020", "module": "commonjs" } }\n');
    wb.write('lib.ts', LIB);
    wb.write('app.ts', APP);
    // Generous for a loaded machine: the check ends as soon as the editor has spoken.
    fs.mkdirSync(path.join(wb.folder, '.tandem'));
    wb.write('.tandem/config.toml', '[tools]\ndiagnostics_settle_ms = 15000\n');
    await wb.start({ 'tandem.approvalMode': 'auto' });
    await wb.openFile('app.ts');
    // The TypeScript server is up once it reports the old mistake.
    await wb.page.locator('.squiggly-error').first().waitFor({ timeout: 90_000 });
    const base = server.requests.length;
    server.push(
      toolCall('call_refs', 'references', { path: 'lib.ts', line: 1, symbol: 'greet' }),
      toolCall('call_patch', 'apply_patch', { input: PATCH }),
      text('done'),
    );
    const chat = await wb.openChat();
    await wb.send(chat, 'use greet wrongly');
    await chat.locator('.item.turn-end', { hasText: 'Done' }).waitFor({ timeout: 120_000 });
    const reqs = await server.waitForRequests(base + 3);
    const offered = (reqs[base].body.tools ?? []).map((tool) => tool.function.name);
    for (const name of ['diagnostics', 'definition', 'references', 'workspace_symbols']) {
      assert.ok(offered.includes(name), `${name} offered: ${offered.join(', ')}`);
    }
    const references = toolMessages(reqs[base + 1])[0];
    assert.match(references, /^3 references of `greet` \(lib\.ts:1\):/, references);
    assert.match(references, /\nlib\.ts:1:17: export function greet\(name: string\): string \{/, references);
    assert.match(references, /\napp\.ts:1:10: import \{ greet \} from "\.\/lib";/, references);
    assert.match(references, /\napp\.ts:3:13: console\.log\(greet\("x"\)\);/, references);
    const patched = toolMessages(reqs[base + 2])[1];
    assert.match(patched, /^The patch was applied:\n- app\.ts: hunk 1 applied\n/, patched);
    assert.match(patched, /The editor reports 1 new error in the changed lines:\napp\.ts:3:19: error: Cannot find name 'missingName'\./, patched);
    assert.ok(!patched.includes('oldMistake'), patched);
  } catch (e) {
    const shot = await wb.screenshot(t.name);
    console.log(`e2e: screenshot of the failure: ${shot}\ncode-server log:\n${wb.serverLog.join('').slice(-3000)}`);
    throw e;
  } finally {
    await wb.stop();
  }
});
