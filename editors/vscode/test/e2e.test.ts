/**
 * End to end in a real VS Code (code-server 4.139.1) in headless Chromium,
 * with the packaged .vsix installed, the real tandem binary and a scripted
 * model server. A failure leaves a screenshot in out/e2e-artifacts (the
 * path is printed).
 */
import { after, before, test, type TestContext } from 'node:test';
import * as assert from 'node:assert/strict';
import { unavailable, Workbench } from './e2e/workbench';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { gate, lastUserText, MODEL_NAME, ModelServer, text, textThen, toolCall, type RecordedRequest } from './support/model_server';
import type { Frame } from 'playwright-core';

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
async function withWorkbench(t: TestContext, body: (wb: Workbench) => Promise<void>, settings: Record<string, unknown> = {}): Promise<void> {
  const wb = new Workbench(server);
  try {
    await wb.start(settings);
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

test('a missing daemon is a clear notification with Set path, and Set path opens the setting', { skip, timeout: 180_000 }, async (t) => {
  await withWorkbench(t, async (wb) => {
    await wb.openChat();
    const toast = wb.page.locator('.notification-toast', { hasText: 'tandem was not found' });
    await toast.waitFor({ timeout: 30_000 });
    assert.match(await toast.innerText(), /\/nonexistent\/tandem \(tandem\.path\)/);
    await toast.locator('.monaco-button', { hasText: 'Set path' }).click();
    await wb.page.locator('.settings-editor').waitFor({ timeout: 30_000 });
    await wb.page.locator('.setting-item-contents', { hasText: 'Path to the' }).first().waitFor();
  }, { 'tandem.path': '/nonexistent/tandem' });
});

/**
 * The rest share one workbench, in order, as a user's session would: each
 * opens its own file and waits for its own answer.
 */
let shared: Workbench | undefined;
let sharedChat: Frame;

async function inShared(t: TestContext, body: (wb: Workbench, chat: Frame) => Promise<void>): Promise<void> {
  try {
    if (!shared) {
      shared = new Workbench(server);
      // Written before the workbench starts, so Quick Open's file index has them.
      shared.write('a.txt', 'alpha\nbeta\n');
      shared.write('r.txt', 'keep me\n');
      shared.write('p.txt', 'one\ntwo\n');
      shared.write('e.txt', 'keep\nold line\nkeep too\n');
      shared.write('k.txt', 'small\n');
      shared.write('f.txt', 'plain\n');
      await shared.start();
      sharedChat = await shared.openChat();
    }
    server.clear();
    await body(shared, sharedChat);
  } catch (e) {
    const shot = await shared?.screenshot(t.name);
    console.log(`e2e: screenshot of the failure: ${shot}`);
    throw e;
  }
}
after(() => shared?.stop());

async function lastToolMessage(index: number): Promise<string> {
  const reqs = await server.waitForRequests(index + 1);
  return toolMessages(reqs[index]).at(-1) ?? '';
}

test('accept a proposed patch from the chat card: the buffer changes, the disk does not', { skip, timeout: 180_000 }, async (t) => {
  await inShared(t, async (wb, chat) => {
    await wb.openFile('a.txt');
    const base = server.requests.length;
    server.push(toolCall('call_acc', 'apply_patch', { input: '*** Begin Patch\n*** Update File: a.txt\n@@\n-alpha\n+ALPHA\n beta\n*** End Patch' }), text('Uppercased.'));
    await wb.send(chat, 'uppercase alpha');
    const card = chat.locator('.item.tool[data-tool-call-id="call_acc"]');
    await card.locator('.badge', { hasText: 'waiting for you' }).waitFor({ timeout: 30_000 });
    assert.equal(await card.locator('.diffs li').first().innerText({ timeout: 30_000 }), 'update a.txt', 'paths are shown relative to the folder');
    await card.locator('button.accept').click();
    await chat.locator('.item.agent', { hasText: 'Uppercased.' }).waitFor({ timeout: 30_000 });
    await wb.expectEditorText(/^ALPHA\nbeta/);
    await wb.page.locator('.tab.dirty', { hasText: 'a.txt' }).waitFor();
    assert.equal(wb.read('a.txt'), 'alpha\nbeta\n', 'nothing is written behind the editor');
    assert.match(await lastToolMessage(base + 1), /The patch was applied/);
    await card.locator('.proposal-outcome', { hasText: 'accepted' }).waitFor();
  });
});

test('reject a proposed patch from the chat card: nothing changes and the model is told', { skip, timeout: 180_000 }, async (t) => {
  await inShared(t, async (wb, chat) => {
    await wb.openFile('r.txt');
    const base = server.requests.length;
    server.push(toolCall('call_rej', 'apply_patch', { input: '*** Begin Patch\n*** Update File: r.txt\n@@\n-keep me\n+drop me\n*** End Patch' }), text('Left it.'));
    await wb.send(chat, 'change r.txt');
    const card = chat.locator('.item.tool[data-tool-call-id="call_rej"]');
    await card.locator('button.reject').click({ timeout: 30_000 });
    await chat.locator('.item.agent', { hasText: 'Left it.' }).waitFor({ timeout: 30_000 });
    await wb.expectEditorText(/^keep me/);
    assert.match(await lastToolMessage(base + 1), /rejected the patch/);
  });
});

test('Restore checkpoint on a message: the files and conflicts are shown, then the buffer goes back', { skip, timeout: 180_000 }, async (t) => {
  await inShared(t, async (wb, chat) => {
    await wb.openFile('k.txt');
    server.push(toolCall('call_k', 'apply_patch', { input: '*** Begin Patch\n*** Update File: k.txt\n@@\n-small\n+LARGE\n*** End Patch' }), text('Enlarged.'));
    await wb.send(chat, 'enlarge k.txt');
    const card = chat.locator('.item.tool[data-tool-call-id="call_k"]');
    await card.locator('button.accept').click({ timeout: 30_000 });
    await chat.locator('.item.agent', { hasText: 'Enlarged.' }).waitFor({ timeout: 30_000 });
    await wb.expectEditorText(/^LARGE/);
    await chat.locator('.item.user', { hasText: 'enlarge k.txt' }).locator('button.restore').click({ timeout: 30_000 });
    const files = wb.page.locator('.quick-input-list .monaco-list-row', { hasText: 'Files only' });
    await files.waitFor({ timeout: 30_000 });
    assert.match(await files.innerText(), /k\.txt: restore/, 'the files are shown before anything changes');
    await wb.expectEditorText(/^LARGE/);
    await files.click();
    await chat.locator('.item.notice', { hasText: 'restored 1 file(s)' }).waitFor({ timeout: 30_000 });
    await wb.expectEditorText(/^small/, 'the buffer is restored through an edit (undo works)');
    assert.equal(wb.read('k.txt'), 'small\n', 'the disk was never written');
  });
});

test('Restore checkpoint over a line you typed since: its diff is shown, and ticking it overwrites it', { skip, timeout: 180_000 }, async (t) => {
  await inShared(t, async (wb, chat) => {
    await wb.openFile('f.txt');
    server.push(toolCall('call_f', 'apply_patch', { input: '*** Begin Patch\n*** Update File: f.txt\n@@\n-plain\n+AGENT\n*** End Patch' }), text('Shouted.'));
    await wb.send(chat, 'shout f.txt');
    const card = chat.locator('.item.tool[data-tool-call-id="call_f"]');
    await card.locator('button.accept').click({ timeout: 30_000 });
    await chat.locator('.item.agent', { hasText: 'Shouted.' }).waitFor({ timeout: 30_000 });
    await wb.openFile('f.txt');
    await wb.page.keyboard.press('Control+Home');
    await wb.page.keyboard.type('mine ');
    await wb.expectEditorText(/^mine AGENT/);
    const notices = await chat.locator('.item.notice', { hasText: 'Rewound' }).count();
    await chat.locator('.item.user', { hasText: 'shout f.txt' }).locator('button.restore').click({ timeout: 30_000 });
    const files = wb.page.locator('.quick-input-list .monaco-list-row', { hasText: 'Files only' });
    await files.waitFor({ timeout: 30_000 });
    assert.match(await files.innerText(), /f\.txt: conflict/, 'the conflict is shown before anything changes');
    await files.click();
    // The diff opens beside; the second QuickPick asks which to overwrite.
    await wb.page.locator('.quick-input-widget', { hasText: 'Overwrite the files you changed since?' }).waitFor({ timeout: 30_000 });
    await wb.page.locator('.monaco-editor .view-line', { hasText: '+mine AGENT' }).first().waitFor({ timeout: 30_000 });
    const row = wb.page.locator('.quick-input-list .monaco-list-row', { hasText: 'f.txt' });
    await row.locator('.quick-input-list-checkbox, input[type="checkbox"], [role="checkbox"]').first().click();
    await wb.page.locator('.quick-input-widget .quick-input-box input').first().press('Enter');
    await chat.locator('.item.notice', { hasText: 'Rewound' }).nth(notices).waitFor({ timeout: 30_000 });
    assert.match(await chat.locator('.item.notice', { hasText: 'Rewound' }).nth(notices).innerText(), /restored 1 file\(s\)/);
    await wb.openFile('f.txt');
    await wb.expectEditorText(/^plain/, 'the typed line was overwritten, as ticked');
    assert.equal(wb.read('f.txt'), 'plain\n', 'through the buffer, not the disk');
  });
});

test('accept a patch in VS Code\'s refactor preview: the ticked change lands in the buffer', { skip, timeout: 180_000 }, async (t) => {
  await inShared(t, async (wb, chat) => {
    await wb.openFile('p.txt');
    const base = server.requests.length;
    server.push(toolCall('call_pre', 'apply_patch', { input: '*** Begin Patch\n*** Update File: p.txt\n@@\n-one\n+ONE\n two\n*** End Patch' }), text('Previewed.'));
    await wb.send(chat, 'preview a change');
    const card = chat.locator('.item.tool[data-tool-call-id="call_pre"]');
    await card.locator('button', { hasText: 'Review…' }).click({ timeout: 30_000 });
    const preview = wb.page.locator('.part.panel');
    const fileRow = preview.locator('.monaco-list-row', { hasText: 'p.txt' }).first();
    await fileRow.waitFor({ timeout: 30_000 });
    // Edits that need confirmation open unticked: tick the file, then Apply.
    const box = fileRow.locator('[role="checkbox"]').first();
    assert.equal(await box.getAttribute('aria-checked'), 'false');
    await box.click();
    await preview.locator('.monaco-button', { hasText: 'Apply' }).first().click();
    await chat.locator('.item.agent', { hasText: 'Previewed.' }).waitFor({ timeout: 30_000 });
    await wb.expectEditorText(/^ONE\ntwo/);
    assert.equal(wb.read('p.txt'), 'one\ntwo\n');
    assert.match(await lastToolMessage(base + 1), /The patch was applied/);
  });
});

test('answer a permission in the chat: the command runs and its output streams into the card', { skip, timeout: 180_000 }, async (t) => {
  await inShared(t, async (wb, chat) => {
    const base = server.requests.length;
    server.push(toolCall('call_perm', 'exec_command', { cmd: 'echo permitted-output' }), text('Ran it.'));
    await wb.send(chat, 'run echo');
    const ask = chat.locator('.item.permission').last();
    await ask.locator('.text', { hasText: 'Run `echo permitted-output`' }).waitFor({ timeout: 30_000 });
    // No option beside it lifts the sandbox: that is a request of its own.
    assert.equal(await ask.locator('button', { hasText: 'without the sandbox' }).count(), 0);
    await ask.locator('button', { hasText: /^Allow once$/ }).click();
    await chat.locator('.item.agent', { hasText: 'Ran it.' }).waitFor({ timeout: 30_000 });
    await chat.locator('.item.tool[data-tool-call-id="call_perm"] .output', { hasText: 'permitted-output' }).waitFor();
    await ask.locator('.answered', { hasText: /Answered: Allow once$/ }).waitFor();
    assert.match(await lastToolMessage(base + 1), /exit code 0\s+permitted-output/);
  });
});

test('answer a question in the chat: the model reads the answer', { skip, timeout: 180_000 }, async (t) => {
  await inShared(t, async (wb, chat) => {
    const base = server.requests.length;
    server.push(
      toolCall('call_ask', 'request_user_input', { questions: [{ id: 'db', question: 'Which database?', options: [{ label: 'sqlite' }, { label: 'postgres' }] }] }),
      text('Using sqlite.'),
    );
    await wb.send(chat, 'set up a database');
    const q = chat.locator('.item.question').last();
    await q.locator('button', { hasText: 'sqlite' }).click({ timeout: 30_000 });
    await q.locator('button', { hasText: 'Answer' }).click();
    await chat.locator('.item.agent', { hasText: 'Using sqlite.' }).waitFor({ timeout: 30_000 });
    assert.match(await lastToolMessage(base + 1), /The user answered: .*sqlite/);
  });
});

test('with the chat hidden, a question is asked in a QuickPick', { skip, timeout: 180_000 }, async (t) => {
  await inShared(t, async (wb, chat) => {
    const base = server.requests.length;
    const hold = gate();
    const ask = toolCall('call_qp', 'request_user_input', { questions: [{ id: 'db', question: 'Which database now?', options: [{ label: 'sqlite' }, { label: 'postgres' }] }] });
    server.push({ steps: [{ gate: hold.promise }, ...ask.steps] }, text('Using postgres.'));
    await wb.send(chat, 'pick a database while I look elsewhere');
    await server.waitForRequests(base + 1);
    // Hide the chat: show the Explorer in the side bar.
    await wb.command('View: Show Explorer');
    await wb.page.locator('.explorer-folders-view').waitFor();
    hold.release();
    const row = wb.page.locator('.quick-input-widget .monaco-list-row', { hasText: 'postgres' });
    await row.waitFor({ timeout: 30_000 });
    await wb.page.locator('.quick-input-widget', { hasText: 'Which database now?' }).waitFor();
    await row.click();
    assert.match(await lastToolMessage(base + 1), /The user answered: .*postgres/);
    sharedChat = await wb.openChat();
    await sharedChat.locator('.item.agent', { hasText: 'Using postgres.' }).waitFor({ timeout: 30_000 });
  });
});

test('Stop cancels the running turn, and the next prompt is answered', { skip, timeout: 180_000 }, async (t) => {
  await inShared(t, async (wb, chat) => {
    const hold = gate();
    server.push(textThen(['Working on it '], hold.promise), text('Fresh answer.'));
    await wb.send(chat, 'a long task');
    await chat.locator('.item.agent', { hasText: 'Working on it' }).waitFor({ timeout: 30_000 });
    await chat.locator('button.stop').click();
    await chat.locator('.item.turn-end', { hasText: 'Cancelled' }).waitFor({ timeout: 30_000 });
    hold.release();
    assert.equal(await chat.locator('button.stop').isVisible(), false);
    await wb.send(chat, 'again');
    await chat.locator('.item.agent', { hasText: 'Fresh answer.' }).waitFor({ timeout: 30_000 });
  });
});

test('the session survives a window reload, and Open Session reopens an older one', { skip, timeout: 180_000 }, async (t) => {
  await inShared(t, async (wb) => {
    await wb.open();
    // The chat comes back with the history, replayed by the new daemon.
    let chat = await wb.openChat();
    await chat.locator('.item.agent', { hasText: 'Fresh answer.' }).waitFor({ timeout: 30_000 });
    await chat.locator('.item.agent', { hasText: 'Uppercased.' }).waitFor();
    // A new session, then back to the first through the QuickPick.
    await chat.locator('button', { hasText: 'New' }).click();
    await chat.locator('.empty').waitFor({ state: 'visible' });
    await wb.command('tandem: Open Session…');
    await wb.page.locator('.quick-input-list .monaco-list-row', { hasText: 'run echo' }).first().waitFor({ timeout: 30_000 }).catch(() => {});
    await wb.page.locator('.quick-input-list .monaco-list-row', { hasText: 'uppercase alpha' }).first().click();
    chat = await wb.chat();
    await chat.locator('.item.agent', { hasText: 'Uppercased.' }).waitFor({ timeout: 30_000 });
  });
});

test('Edit selection on a key: the instruction is asked, the proposal opens as a diff, Accept lands it in the buffer', { skip, timeout: 180_000 }, async (t) => {
  await inShared(t, async (wb) => {
    await wb.openFile('e.txt');
    const base = server.requests.length;
    server.push(text('```\nnew line\n```'));
    // Select line 2 (with its line break), then the keybinding.
    await wb.page.keyboard.press('Control+Home');
    await wb.page.keyboard.press('ArrowDown');
    await wb.page.keyboard.press('Shift+ArrowDown');
    await wb.page.keyboard.press('Control+Alt+E');
    const input = wb.page.locator('.quick-input-widget input');
    await input.waitFor({ timeout: 30_000 });
    await input.fill('make it new');
    await wb.page.keyboard.press('Enter');
    const [req] = (await server.waitForRequests(base + 1)).slice(base);
    assert.match(lastUserText(req), /old line[\s\S]*make it new|make it new[\s\S]*old line/);
    // The proposal opens as a diff with Accept / Reject in its title bar.
    const accept = wb.page.locator('.editor-actions .action-label[aria-label^="Accept Proposal"]').first();
    await accept.waitFor({ timeout: 30_000 });
    await accept.click();
    await wb.page.locator('.tab', { hasText: 'tandem\'s proposal' }).waitFor({ state: 'detached', timeout: 30_000 });
    await wb.page.locator('.tab.dirty', { hasText: 'e.txt' }).waitFor({ timeout: 30_000 });
    await wb.page.locator('.tab', { hasText: 'e.txt' }).first().click();
    await wb.expectEditorText(/^keep\nnew line\nkeep too/);
    assert.equal(wb.read('e.txt'), 'keep\nold line\nkeep too\n');
  });
});

test('the model picker switches the model the server receives; the context meter shows the numbers and the cost', { skip, timeout: 180_000 }, async (t) => {
  const wb = new Workbench(server);
  // `fast` beside the settings' model, with a price: in the daemon's config.toml.
  fs.writeFileSync(path.join(wb.home, 'config.toml'), [
    '[model]', 'context_window = 64000',
    '[models.fast]', 'name = "fast-model"', 'efforts = ["low", "high"]', 'context_window = 32000',
    '[pricing."fast-model"]', 'input_per_mtok = 1000.0', 'output_per_mtok = 2000.0', '',
  ].join('\n'));
  try {
    await wb.start();
    server.clear();
    const base = server.requests.length;
    const chat = await wb.openChat();
    server.push(text('first answer'));
    await wb.send(chat, 'hello models');
    await chat.locator('.item.agent', { hasText: 'first answer' }).waitFor({ timeout: 30_000 });
    const meter = chat.locator('.meter');
    await meter.locator('.meter-text', { hasText: '15 / 64.0k (0%)' }).waitFor({ timeout: 30_000 });
    assert.match(await meter.getAttribute('title') ?? '', /Context: 15 of 64,000 tokens \(0%\)[\s\S]*Cost: unknown/);
    const model = chat.locator('select.model');
    assert.deepEqual(await model.locator('option').allInnerTexts(), ['default', 'fast']);
    assert.equal(await chat.locator('select.effort').isVisible(), false, 'the default model lists no efforts');

    await model.selectOption('fast');
    const effort = chat.locator('select.effort');
    await effort.waitFor({ state: 'visible', timeout: 30_000 });
    assert.deepEqual(await effort.locator('option').allInnerTexts(), ['low', 'high']);
    await effort.selectOption('high');
    server.push(text('fast answer'));
    // The daemon's answer is in the transcript (`data-current`) before the next prompt goes.
    await chat.locator('select.effort[data-current="high"]').waitFor({ state: 'attached', timeout: 30_000 });
    assert.equal(await model.getAttribute('data-current'), 'fast');
    // The status bar names the model in force.
    await wb.page.locator('.statusbar-item', { hasText: 'fast-model' }).first().waitFor({ timeout: 30_000 });
    await wb.send(chat, 'again on fast');
    await chat.locator('.item.agent', { hasText: 'fast answer' }).waitFor({ timeout: 30_000 });
    // By their prompts: another window's daemon may still talk to the server.
    const reqs = (await server.waitForRequests(base + 2)).slice(base);
    const first = reqs.find((r) => lastUserText(r) === 'hello models');
    const second = reqs.find((r) => lastUserText(r) === 'again on fast');
    const seen = reqs.map((r) => `${String(r.body.model)}: ${lastUserText(r)}`).join('\n');
    assert.equal(first?.body.model, MODEL_NAME, seen);
    assert.equal(second?.body.model, 'fast-model', seen);
    assert.equal((second?.body as { reasoning_effort?: string }).reasoning_effort, 'high');
    await meter.locator('.meter-text', { hasText: '15 / 32.0k (0%)' }).waitFor({ timeout: 30_000 });
    assert.match(await meter.getAttribute('title') ?? '', /Session cost: \$0\.0200/);
  } catch (e) {
    const shot = await wb.screenshot(t.name);
    console.log(`e2e: screenshot of the failure: ${shot}\ncode-server log:\n${wb.serverLog.join('').slice(-3000)}`);
    throw e;
  } finally {
    await wb.stop();
  }
});

test('a pasted image reaches the model server as an image part', { skip, timeout: 180_000 }, async (t) => {
  await withWorkbench(t, async (wb) => {
    const base = server.requests.length;
    server.push(text('A tiny ', 'grey square.'));
    const chat = await wb.openChat();
    const png = Buffer.alloc(2048, 7);
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]).copy(png);
    const b64 = png.toString('base64');
    const box = chat.locator('textarea.prompt');
    // A paste as the browser delivers one: a ClipboardEvent carrying the file.
    await box.evaluate((el, data) => {
      const bytes = Uint8Array.from(atob(data), (c) => c.charCodeAt(0));
      const clipboard = new DataTransfer();
      clipboard.items.add(new File([bytes], 'shot.png', { type: 'image/png' }));
      el.dispatchEvent(new ClipboardEvent('paste', { clipboardData: clipboard, bubbles: true, cancelable: true }));
    }, b64);
    await chat.locator('.image-chip', { hasText: 'image (png, 2 KB)' }).waitFor();
    await wb.send(chat, 'What is in this image?');
    await chat.locator('.item.agent', { hasText: 'A tiny grey square.' }).waitFor({ timeout: 30_000 });
    await chat.locator('.item.user .attachment', { hasText: 'image (png)' }).waitFor();
    assert.equal(await chat.locator('.image-chip').count(), 0, 'the pasted image is cleared once sent');
    const reqs = await server.waitForRequests(base + 1);
    const user = (reqs[base].body.messages ?? []).filter((m) => m.role === 'user').at(-1);
    assert.deepEqual(user?.content, [
      { type: 'text', text: 'What is in this image?' },
      { type: 'image_url', image_url: { url: `data:image/png;base64,${b64}` } },
    ]);
  });
});
