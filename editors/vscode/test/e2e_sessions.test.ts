/**
 * End to end in a real VS Code (code-server), issue 29's session UI: Open
 * Session lists each session by its title, "Rename Session…" renames the
 * chat's session, and with "Follow the Agent" on, a file the agent reads
 * is revealed at the line it read from.
 */
import { after, before, test } from 'node:test';
import * as assert from 'node:assert/strict';
import { unavailable, Workbench } from './e2e/workbench';
import { ModelServer, text, toolCall } from './support/model_server';

const skip = unavailable();
if (skip) console.log(`e2e: did not run: ${skip}`);

let server: ModelServer;
before(async () => {
  server = await ModelServer.start();
});
after(() => server?.close());

test('sessions are listed by title, renamed, and the agent is followed to the line it reads', { skip, timeout: 240_000 }, async (t) => {
  const wb = new Workbench(server);
  try {
    wb.write('b.txt', 'one\ntwo\nthree\nfour\n');
    await wb.start({ 'tandem.followAgent': true });
    const chat = await wb.openChat();
    server.push(toolCall('call_read', 'read_file', { path: 'b.txt', offset: 3 }), text('Read it.'));
    await wb.send(chat, 'Fix the parser please');
    await chat.locator('.item.agent', { hasText: 'Read it.' }).waitFor({ timeout: 60_000 });

    // Followed: b.txt opened (without taking focus from the chat), at line 3.
    await wb.page.locator('.tab', { hasText: 'b.txt' }).first().waitFor({ timeout: 30_000 });
    await wb.page.locator('.statusbar-item', { hasText: 'Ln 3, Col 1' }).first().waitFor({ timeout: 30_000 });

    const rows = wb.page.locator('.quick-input-list .monaco-list-row');
    await wb.command('tandem: Open Session…');
    await rows.filter({ hasText: 'Fix the parser please' }).first().waitFor({ timeout: 30_000 });
    await wb.page.keyboard.press('Escape');

    await wb.command('tandem: Rename Session…');
    const input = wb.page.locator('.quick-input-widget input');
    await input.waitFor();
    // The palette's own text (`>tandem: Rename Session…`) stays in the same
    // widget until the command's input box replaces it: wait for that.
    const deadline = Date.now() + 30_000;
    while ((await input.inputValue()).startsWith('>') && Date.now() < deadline) {
      await wb.page.waitForTimeout(100);
    }
    assert.equal(await input.inputValue(), 'Fix the parser please', 'the current title is offered');
    await input.fill('Parser work');
    await wb.page.keyboard.press('Enter');
    await wb.page.locator('.quick-input-widget').waitFor({ state: 'hidden' });

    await wb.command('tandem: Open Session…');
    await rows.filter({ hasText: 'Parser work' }).first().waitFor({ timeout: 30_000 });
    assert.equal(await rows.filter({ hasText: 'Fix the parser please' }).count(), 0, 'listed by its new title');
    await wb.page.keyboard.press('Escape');
  } catch (e) {
    const shot = await wb.screenshot(t.name);
    console.log(`e2e: screenshot of the failure: ${shot}\ncode-server log:\n${wb.serverLog.join('').slice(-3000)}`);
    throw e;
  } finally {
    await wb.stop();
  }
});
