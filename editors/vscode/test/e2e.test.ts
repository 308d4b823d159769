/**
 * End to end in a real VS Code (code-server 4.139.1) in headless Chromium,
 * with the packaged .vsix installed, the real tandem binary and a scripted
 * model server. A failure leaves a screenshot in out/e2e-artifacts (the
 * path is printed).
 */
import { after, before, test, type TestContext } from 'node:test';
import * as assert from 'node:assert/strict';
import { unavailable, Workbench } from './e2e/workbench';
import { lastUserText, ModelServer, text, toolCall, type RecordedRequest } from './support/model_server';

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

/** Runs `body` with a fresh workbench; on failure, a screenshot goes to the output. */
async function withWorkbench(t: TestContext, body: (wb: Workbench) => Promise<void>, wb = new Workbench(server)): Promise<void> {
  try {
    await wb.start();
    await body(wb);
  } catch (e) {
    const shot = await wb.screenshot(t.name);
    console.log(`e2e: screenshot of the failure: ${shot}\ncode-server log:\n${wb.serverLog.join('').slice(-3000)}`);
    throw e;
  } finally {
    await wb.stop();
  }
}

test('ask in the chat and see the streamed answer; the agent read the unsaved line', { skip, timeout: 180_000 }, async (t) => {
  await withWorkbench(t, async (wb) => {
    wb.write('notes.txt', 'saved line\n');
    await wb.openFile('notes.txt');
    await wb.page.keyboard.press('Control+End');
    await wb.page.keyboard.type('unsaved line');
    const base = server.requests.length;
    server.push(toolCall('call_1', 'read_file', { path: 'notes.txt' }), text('The file has ', 'an **unsaved** line.'));
    const chat = await wb.openChat();
    await wb.send(chat, 'What is in notes.txt?');
    await chat.locator('.item.agent', { hasText: 'The file has an unsaved line.' }).waitFor({ timeout: 30_000 });
    await chat.locator('.item.turn-end', { hasText: 'Done' }).waitFor();
    assert.equal(await chat.locator('.item.agent strong').innerText(), 'unsaved', 'markdown is rendered');
    const reqs = await server.waitForRequests(base + 2);
    assert.equal(lastUserText(reqs[base]), 'What is in notes.txt?');
    assert.match(toolMessages(reqs[base + 1])[0], /unsaved line/);
    assert.equal(wb.read('notes.txt'), 'saved line\n');
  });
});
