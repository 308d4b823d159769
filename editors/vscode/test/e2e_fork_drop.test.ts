/**
 * End to end in a real VS Code (code-server), two pieces of issue 29's
 * chat UI: "Fork from here" on a user message opens the fork in the chat
 * with the history before that message (and the next prompt continues from
 * there), and an image dropped on the prompt reaches the model server as
 * an image part (the paste is in e2e.test.ts).
 */
import { after, before, test, type TestContext } from 'node:test';
import * as assert from 'node:assert/strict';
import { unavailable, Workbench } from './e2e/workbench';
import { ModelServer, text, type RecordedRequest } from './support/model_server';

const skip = unavailable();
if (skip) console.log(`e2e: did not run: ${skip}`);

let server: ModelServer;
before(async () => {
  server = await ModelServer.start();
});
after(() => server?.close());

async function withWorkbench(t: TestContext, body: (wb: Workbench) => Promise<void>): Promise<void> {
  const wb = new Workbench(server);
  try {
    await wb.start({});
    await body(wb);
  } catch (e) {
    const shot = await wb.screenshot(t.name);
    console.log(`e2e: screenshot of the failure: ${shot}\ncode-server log:\n${wb.serverLog.join('').slice(-3000)}`);
    throw e;
  } finally {
    await wb.stop();
  }
}

/** The user and assistant texts of a request to the model, in order. */
function conversation(body: RecordedRequest['body']): string[] {
  return (body.messages ?? [])
    .filter((m) => m.role === 'user' || m.role === 'assistant')
    .map((m) => (typeof m.content === 'string' ? m.content : JSON.stringify(m.content)));
}

test('"Fork from here" opens the fork in the chat with the history before that message', { skip, timeout: 240_000 }, async (t) => {
  await withWorkbench(t, async (wb) => {
    const chat = await wb.openChat();
    server.push(text('First answer.'));
    await wb.send(chat, 'first question');
    await chat.locator('.item.agent', { hasText: 'First answer.' }).waitFor({ timeout: 60_000 });
    server.push(text('Second answer.'));
    await wb.send(chat, 'second question');
    await chat.locator('.item.agent', { hasText: 'Second answer.' }).waitFor({ timeout: 60_000 });

    const second = chat.locator('.item.user', { hasText: 'second question' });
    await second.locator('button.fork', { hasText: 'Fork from here' }).click();
    // The chat now shows the fork: the history before that message only.
    await chat.locator('.item', { hasText: 'Forked before' }).waitFor({ timeout: 30_000 });
    await chat.locator('.item.user', { hasText: 'first question' }).waitFor();
    await chat.locator('.item.agent', { hasText: 'First answer.' }).waitFor();
    assert.equal(await chat.locator('.item.user', { hasText: 'second question' }).count(), 0, 'the fork ends before that message');
    assert.equal(await chat.locator('.item.agent', { hasText: 'Second answer.' }).count(), 0);

    // The next prompt continues the fork, not the original.
    const base = server.requests.length;
    server.push(text('Another way.'));
    await wb.send(chat, 'another way');
    await chat.locator('.item.agent', { hasText: 'Another way.' }).waitFor({ timeout: 60_000 });
    const [req] = (await server.waitForRequests(base + 1)).slice(base);
    const said = conversation(req.body);
    assert.ok(said.some((s) => s.includes('first question')), JSON.stringify(said));
    assert.ok(said.some((s) => s.includes('First answer.')), JSON.stringify(said));
    assert.ok(!said.some((s) => s.includes('second question') || s.includes('Second answer.')), JSON.stringify(said));
    assert.ok(said.at(-1)?.includes('another way'), JSON.stringify(said));
  });
});

test('an image dropped on the prompt reaches the model server as an image part', { skip, timeout: 180_000 }, async (t) => {
  await withWorkbench(t, async (wb) => {
    const base = server.requests.length;
    server.push(text('A dropped ', 'square.'));
    const chat = await wb.openChat();
    const png = Buffer.alloc(3072, 9);
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]).copy(png);
    const b64 = png.toString('base64');
    const box = chat.locator('textarea.prompt');
    // A drop as the browser delivers one: dragover (which must be accepted
    // for the drop to happen), then drop, each carrying the file.
    const accepted = await box.evaluate((el, data) => {
      const bytes = Uint8Array.from(atob(data), (c) => c.charCodeAt(0));
      const transfer = new DataTransfer();
      transfer.items.add(new File([bytes], 'drop.png', { type: 'image/png' }));
      const over = new DragEvent('dragover', { dataTransfer: transfer, bubbles: true, cancelable: true });
      el.dispatchEvent(over);
      el.dispatchEvent(new DragEvent('drop', { dataTransfer: transfer, bubbles: true, cancelable: true }));
      return over.defaultPrevented;
    }, b64);
    assert.ok(accepted, 'the composer accepts the drag');
    await chat.locator('.image-chip', { hasText: 'image (png, 3 KB)' }).waitFor();
    await wb.send(chat, 'What did I drop?');
    await chat.locator('.item.agent', { hasText: 'A dropped square.' }).waitFor({ timeout: 30_000 });
    assert.equal(await chat.locator('.image-chip').count(), 0, 'the dropped image is cleared once sent');
    const reqs = await server.waitForRequests(base + 1);
    const user = (reqs[base].body.messages ?? []).filter((m) => m.role === 'user').at(-1);
    assert.deepEqual(user?.content, [
      { type: 'text', text: 'What did I drop?' },
      { type: 'image_url', image_url: { url: `data:image/png;base64,${b64}` } },
    ]);
  });
});
