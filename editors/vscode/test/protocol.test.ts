/**
 * Protocol level: the extension's own modules (ChatSession, UserRequests,
 * Review, the transcript reducer) drive the real tandem binary over stdio
 * against a scripted model server on loopback. Assertions are on the
 * transcript the chat would render, on the buffers, and on the requests the
 * model server received.
 */
import { after, before, test } from 'node:test';
import * as assert from 'node:assert/strict';
import * as path from 'node:path';
import { Daemon, REPO_ROOT, Workspace } from './support/daemon';
import { gate, lastUserText, ModelServer, text, textThen, toolCall, type RecordedRequest } from './support/model_server';
import type { Item, LocalEvent } from '../src/chat/transcript';
import * as ext from '../src/lsp_ext';
import { contextMeter } from '../src/chat/models';

let server: ModelServer;
before(async () => {
  server = await ModelServer.start();
});
after(() => server.close());

function start(ws = new Workspace()): Promise<Daemon> {
  return Daemon.start(ws, { model: (server.sessionConfig() as { model: unknown }).model, limits: { retry_base_delay_ms: 1, retry_max_delay_ms: 5 } });
}

function items<K extends Item['kind']>(d: Daemon, kind: K): Extract<Item, { kind: K }>[] {
  return d.chat.transcript.items.filter((i): i is Extract<Item, { kind: K }> => i.kind === kind);
}

function toolMessages(r: RecordedRequest): string[] {
  return (r.body.messages ?? []).filter((m) => m.role === 'tool').map((m) => String(m.content));
}

async function newRequests(from: number, n: number): Promise<RecordedRequest[]> {
  return (await server.waitForRequests(from + n)).slice(from);
}

test('a streamed answer lands in the transcript, and the model read the unsaved buffer', async () => {
  const d = await start();
  const base = server.requests.length;
  d.ws.write('notes.txt', 'on disk\n');
  d.open('notes.txt', 'typed but unsaved\n');
  server.push(toolCall('call_r', 'read_file', { path: 'notes.txt' }), text('The file ', 'says ', '**typed**.'));
  await d.chat.send('what does notes.txt say?', []);
  const [first, second] = await newRequests(base, 2);
  assert.equal(lastUserText(first), 'what does notes.txt say?');
  assert.match(toolMessages(second)[0], /typed but unsaved/);
  const agent = items(d, 'agent');
  assert.equal(agent.at(-1)?.text, 'The file says **typed**.');
  assert.deepEqual(items(d, 'tool').map((t) => [t.title, t.status]), [['Read notes.txt', 'completed']]);
  assert.equal(items(d, 'turn_end').at(-1)?.stopReason, 'end_turn');
  assert.equal(d.chat.transcript.running, false);
  assert.equal(await d.stop(), 0);
});

test('a permission answered in the chat runs the command', async () => {
  const d = await start();
  const base = server.requests.length;
  server.push(toolCall('call_x', 'exec_command', { cmd: 'echo hello-from-tool' }), text('ran it'));
  const sent = d.chat.send('run echo', []);
  const card = await d.waitForLocal((e): e is Extract<LocalEvent, { local: 'permission' }> => e.local === 'permission');
  assert.equal(card.title, 'Run `echo hello-from-tool`');
  assert.deepEqual(card.options.map((o) => o.optionId), ['allow_once', 'allow_always', 'reject_once', 'reject_always']);
  d.requests.answerPermission(card.requestId, 'allow_once');
  await sent;
  const [, second] = await newRequests(base, 2);
  assert.match(toolMessages(second)[0], /exit code 0\s+hello-from-tool/);
  const perm = items(d, 'permission')[0];
  assert.equal(perm.answer, 'Allow once');
  assert.equal(items(d, 'tool')[0].output, 'hello-from-tool\n');
  await d.stop();
});

test('a review accepted in part: only the accepted hunk lands in the buffer, and the model is told', async () => {
  const d = await start();
  const base = server.requests.length;
  const original = 'one\ntwo\nthree\nfour\nfive\nsix\nseven\n';
  d.ws.write('a.txt', original);
  const doc = d.open('a.txt', original);
  const patch = '*** Begin Patch\n*** Update File: a.txt\n@@\n-one\n+ONE\n two\n@@\n six\n-seven\n+SEVEN\n*** End Patch';
  server.push(toolCall('call_p', 'apply_patch', { input: patch }), text('patched'));
  // VS Code's preview with the second change unticked.
  d.applyFilter = (edits) => edits.slice(0, 1);
  const sent = d.chat.send('uppercase the ends', []);
  const proposal = await d.waitForLocal((e): e is Extract<LocalEvent, { local: 'proposal' }> => e.local === 'proposal');
  assert.equal(proposal.toolCallId, 'call_p');
  const card = items(d, 'tool').find((t) => t.toolCallId === 'call_p');
  assert.equal(card?.waitingFor, 'permission');
  assert.equal(card?.diffs.length, 1, 'the card shows the diff before the review');
  await d.review.preview('call_p');
  await sent;
  assert.equal(doc.text, 'ONE\ntwo\nthree\nfour\nfive\nsix\nseven\n');
  assert.equal(d.ws.read('a.txt'), original, 'the disk is not touched; the buffer is unsaved');
  const [, second] = await newRequests(base, 2);
  assert.match(toolMessages(second)[0], /only in part[\s\S]*hunk 1 applied; hunk 2 rejected by the user/);
  assert.equal(card?.proposal?.outcome, 'reviewed');
  await d.stop();
});

test('Accept and Reject of a whole proposal from the chat card', async () => {
  const d = await start();
  const base = server.requests.length;
  d.ws.write('b.txt', 'alpha\n');
  const doc = d.open('b.txt', 'alpha\n');
  const patch = '*** Begin Patch\n*** Update File: b.txt\n@@\n-alpha\n+ALPHA\n*** End Patch';
  server.push(toolCall('call_a', 'apply_patch', { input: patch }), text('ok'), toolCall('call_b', 'apply_patch', { input: patch.replace('-alpha\n+ALPHA', '-ALPHA\n+Alpha') }), text('ok'));
  const first = d.chat.send('accept this', []);
  await d.waitForLocal((e): e is LocalEvent => e.local === 'proposal' && e.toolCallId === 'call_a');
  await d.review.accept('call_a');
  await first;
  assert.equal(doc.text, 'ALPHA\n');
  const second = d.chat.send('and this', []);
  await d.waitForLocal((e): e is LocalEvent => e.local === 'proposal' && e.toolCallId === 'call_b');
  d.review.reject('call_b', 'keep it upper case');
  await second;
  assert.equal(doc.text, 'ALPHA\n');
  const reqs = await newRequests(base, 4);
  assert.match(toolMessages(reqs[1]).at(-1)!, /The patch was applied/);
  assert.match(toolMessages(reqs[3]).at(-1)!, /rejected the patch[\s\S]*keep it upper case/);
  await d.stop();
});

test('a question answered in the chat reaches the model', async () => {
  const d = await start();
  const base = server.requests.length;
  server.push(
    toolCall('call_q', 'request_user_input', { questions: [{ id: 'db', question: 'Which database?', options: [{ label: 'sqlite' }, { label: 'postgres' }] }] }),
    text('sqlite it is'),
  );
  const sent = d.chat.send('set up the tests', []);
  const card = await d.waitForLocal((e): e is Extract<LocalEvent, { local: 'question' }> => e.local === 'question');
  assert.equal(card.questions[0].question, 'Which database?');
  d.requests.answerQuestion(card.requestId, { db: 'sqlite' });
  await sent;
  const [first, second] = await newRequests(base, 2);
  assert.ok(first.body.tools?.some((t) => t.function.name === 'request_user_input'), 'the extension declared requestUserInput');
  assert.match(toolMessages(second)[0], /The user answered: .*sqlite/);
  assert.equal(items(d, 'question')[0].answer, 'sqlite');
  await d.stop();
});

test('Stop cancels the running turn, and the next prompt runs clean', async () => {
  const d = await start();
  const base = server.requests.length;
  const hold = gate();
  server.push(textThen(['partial '], hold.promise), text('second answer'));
  const sent = d.chat.send('long task', []);
  await newRequests(base, 1);
  // Wait until the partial text is shown, then press Stop.
  const deadline = Date.now() + 20_000;
  while (!items(d, 'agent').some((a) => a.text.includes('partial'))) {
    assert.ok(Date.now() < deadline, 'the partial answer never arrived');
    await new Promise((r) => setTimeout(r, 20));
  }
  d.chat.cancel();
  await sent;
  hold.release();
  assert.equal(items(d, 'turn_end').at(-1)?.stopReason, 'cancelled');
  assert.equal(d.chat.transcript.running, false);
  await d.chat.send('again', []);
  assert.equal(items(d, 'agent').at(-1)?.text, 'second answer');
  assert.equal(items(d, 'turn_end').at(-1)?.stopReason, 'end_turn');
  await d.stop();
});

test('typing while a turn runs steers it: the model reads the steer in the same turn', async () => {
  const d = await start();
  const base = server.requests.length;
  const hold = gate();
  server.push(textThen(['first part '], hold.promise), text('read the steer'));
  const sent = d.chat.send('start working', []);
  await newRequests(base, 1);
  const deadline = Date.now() + 20_000;
  while (!items(d, 'agent').some((a) => a.text.includes('first part'))) {
    assert.ok(Date.now() < deadline, 'the first chunk never arrived');
    await new Promise((r) => setTimeout(r, 20));
  }
  assert.equal(d.chat.transcript.running, true);
  await d.chat.send('also check the tests', []);
  hold.release();
  await sent;
  const [, second] = await newRequests(base, 2);
  assert.equal(lastUserText(second), 'also check the tests', 'the steer reached the next step of the same turn');
  assert.equal(items(d, 'turn_end').length, 1, 'one turn');
  assert.deepEqual(items(d, 'user').map((u) => u.text), ['start working', 'also check the tests']);
  await d.stop();
});

test('the mode picker sets the session mode and the chat shows it', async () => {
  const d = await start();
  await d.chat.newSession();
  // The answer carries the mode: the picker is set before any update.
  const startMode: string | undefined = d.chat.transcript.mode;
  assert.equal(startMode, 'review');
  await d.chat.setMode('auto');
  const deadline = Date.now() + 20_000;
  while (d.chat.transcript.mode !== 'auto') {
    assert.ok(Date.now() < deadline, 'no current_mode_update');
    await new Promise((r) => setTimeout(r, 20));
  }
  await d.stop();
});

test('the model picker switches the model the server receives, and the meter follows the context', async () => {
  const config = server.sessionConfig() as { model: Record<string, unknown> };
  const d = await Daemon.start(new Workspace(), {
    model: { ...config.model, context_window: 64000 },
    models: { fast: { name: 'fast-model', efforts: ['low', 'high'], context_window: 32000 } },
    pricing: { 'fast-model': { input_per_mtok: 1000, output_per_mtok: 2000 } },
  });
  const base = server.requests.length;
  await d.chat.newSession();
  assert.deepEqual(d.chat.transcript.models?.models.map((m) => m.id), ['default', 'fast']);
  assert.equal(d.chat.transcript.models?.model, 'default');
  await d.chat.setModel('fast', 'high');
  assert.equal(d.chat.transcript.models?.model, 'fast');
  assert.equal(d.chat.transcript.models?.effort, 'high');
  server.push(text('quick'));
  await d.chat.send('hello', []);
  const [req] = await newRequests(base, 1);
  assert.equal(req.body.model, 'fast-model');
  assert.equal((req.body as { reasoning_effort?: string }).reasoning_effort, 'high');
  const meter = contextMeter(d.chat.transcript);
  assert.equal(meter?.text, '15 / 32.0k (0%)');
  assert.match(meter?.tooltip ?? '', /Session cost: \$0\.0200/);
  await d.stop();
});

test('a session reopened in a new daemon replays its history into the chat', async () => {
  const ws = new Workspace();
  const d1 = await start(ws);
  server.push(text('remembered answer'));
  await d1.chat.send('remember me', []);
  const sessionId = d1.chat.sessionId!;
  await d1.chat.setMode('read-only');
  await d1.stop();

  const d2 = await start(ws);
  const client = await d2.chat.ctx.ensureClient();
  const { sessions } = await client!.sendRequest(ext.listSessions, {});
  const listed = sessions.find((s) => s.sessionId === sessionId);
  assert.equal(listed?.title, 'remember me');
  await d2.chat.load(sessionId);
  assert.deepEqual(items(d2, 'user').map((u) => u.text), ['remember me']);
  assert.equal(items(d2, 'agent')[0]?.text, 'remembered answer');
  assert.equal(items(d2, 'turn_end')[0]?.stopReason, 'end_turn');
  assert.equal(d2.chat.transcript.mode, 'read-only', 'the logged mode, not the default');
  await d2.stop();
});

test('a task run from a code action streams into its own session, over the unsaved selection', async () => {
  const d = await start();
  const base = server.requests.length;
  d.ws.write('c.rs', 'fn main() {}\n');
  const doc = d.open('c.rs', 'fn main() { let x = 1; }\n');
  const client = await d.chat.ctx.ensureClient();
  const actions = (await client!.sendRequest('textDocument/codeAction', {
    textDocument: { uri: doc.uri },
    range: { start: { line: 0, character: 12 }, end: { line: 0, character: 22 } },
    context: { diagnostics: [] },
  })) as { title: string; command: { command: string; arguments: ext.RunTaskArgs[] } }[];
  assert.ok(actions.some((a) => a.title === 'tandem: Edit selection…'));
  assert.ok(!actions.some((a) => a.title === 'tandem: Fix'), 'Fix needs diagnostics');
  const explain = actions.find((a) => a.title === 'tandem: Explain');
  assert.equal(explain?.command.command, ext.RUN_TASK_COMMAND);
  server.push(text('It binds ', 'x to 1.'));
  // What the extension's tandem.runTask command sends for a lightbulb action.
  const started = (await client!.sendRequest('workspace/executeCommand', {
    command: ext.RUN_TASK_COMMAND,
    arguments: explain!.command.arguments,
  })) as ext.StartedTaskResult;
  d.chat.switchTo(started.sessionId);
  const [req] = await newRequests(base, 1);
  assert.match(lastUserText(req), /let x = 1;/, 'the model got the unsaved selection');
  const deadline = Date.now() + 20_000;
  while (!items(d, 'turn_end').length) {
    assert.ok(Date.now() < deadline, 'the task turn never ended in the chat');
    await new Promise((r) => setTimeout(r, 20));
  }
  assert.equal(items(d, 'agent').at(-1)?.text, 'It binds x to 1.');
  const { sessions } = await client!.sendRequest(ext.listSessions, {});
  assert.equal(sessions.find((x) => x.sessionId === started.sessionId)?.kind, 'task');
  await d.stop();
});

test('Edit selection: the inline edit is a proposal; accepting it changes only the selection in the buffer', async () => {
  const d = await start();
  d.ws.write('e.txt', 'keep\nold line\nkeep too\n');
  const doc = d.open('e.txt', 'keep\nold line\nkeep too\n');
  server.push(text('```\nnew line\n```'));
  const client = await d.chat.ctx.ensureClient();
  const done = client!.sendRequest(ext.runTask, {
    task: 'edit',
    textDocument: { uri: doc.uri, version: doc.version },
    range: { start: { line: 1, character: 0 }, end: { line: 2, character: 0 } },
    instruction: 'make it new',
  });
  const proposal = await d.waitForLocal((e): e is Extract<LocalEvent, { local: 'proposal' }> => e.local === 'proposal');
  assert.match(proposal.toolCallId, /^tandem-task-/);
  assert.equal(doc.text, 'keep\nold line\nkeep too\n', 'nothing lands before Accept');
  await d.review.accept(proposal.toolCallId);
  const result = (await done) as { stopReason: string; edit?: { outcome: string } };
  assert.equal(result.stopReason, 'end_turn');
  assert.equal(result.edit?.outcome, 'accepted');
  assert.equal(doc.text, 'keep\nnew line\nkeep too\n');
  assert.equal(d.ws.read('e.txt'), 'keep\nold line\nkeep too\n');
  await d.stop();
});

test('an MCP server of the session config is called, shown as an mcp tool, and listed by tandem/listMcpServers', async () => {
  const log = path.join(new Workspace().root, 'fault.log');
  const fault = path.join(REPO_ROOT, 'tests/mcp/fault_server.py');
  const d = await Daemon.start(new Workspace(), {
    model: (server.sessionConfig() as { model: unknown }).model,
    approval: { mode: 'auto' },
    mcp_servers: { fault: { command: 'python3', args: [fault, 'tools', log], startup_timeout_sec: 30 } },
  });
  const base = server.requests.length;
  server.push(toolCall('call_m', 'mcp__fault__echo', { text: 'from vscode' }), text('echoed'));
  await d.chat.send('echo', []);
  const [, second] = await newRequests(base, 2);
  assert.deepEqual(toolMessages(second), ['fault echo: from vscode']);
  assert.deepEqual(items(d, 'tool').map((t) => [t.title, t.status]), [['echo (fault)', 'completed']]);
  const client = await d.chat.ctx.ensureClient();
  const { servers } = await client!.sendRequest(ext.listMcpServers, { sessionId: d.chat.sessionId! });
  assert.equal(servers.length, 1);
  assert.equal(servers[0].state, 'ready');
  assert.ok(servers[0].tools.some((t) => t.name === 'mcp__fault__echo' && t.tool === 'echo'));
  assert.equal(await d.stop(), 0);
});
