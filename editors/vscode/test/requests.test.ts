import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { UserRequests, permissionAnswer, userInputAnswer } from '../src/requests';
import { CancellationTokenSource, fake } from './fake_vscode';
import type { LocalEvent } from '../src/chat/transcript';
import type { RequestPermissionParams } from '../src/lsp_ext';

const params: RequestPermissionParams = {
  sessionId: 's',
  toolCall: { toolCallId: 'c1', title: 'Run `ls`', kind: 'execute', status: 'pending' },
  options: [
    { optionId: 'allow_once', name: 'Allow once', kind: 'allow_once' },
    { optionId: 'allow_always', name: 'Always allow `ls` in this session', kind: 'allow_always' },
    { optionId: 'reject_once', name: 'Reject', kind: 'reject_once' },
    { optionId: 'reject_always', name: 'Always reject in this session', kind: 'reject_always' },
  ],
};

test('answers have the wire shapes', () => {
  assert.deepEqual(permissionAnswer('allow_once'), { outcome: { outcome: 'selected', optionId: 'allow_once' } });
  assert.deepEqual(permissionAnswer(undefined), { outcome: { outcome: 'cancelled' } });
  assert.deepEqual(permissionAnswer('reject_once', 'no'), { outcome: { outcome: 'selected', optionId: 'reject_once', reason: 'no' } });
  assert.deepEqual(userInputAnswer({ db: 'sqlite' }), { answers: { db: 'sqlite' } });
  assert.deepEqual(userInputAnswer(null), { outcome: 'cancelled' });
});

test('with the chat visible, the card answers the permission', async () => {
  fake.reset();
  const events: LocalEvent[] = [];
  const r = new UserRequests((e) => events.push(e), () => true);
  const answer = r.requestPermission(params, new CancellationTokenSource().token as never);
  const card = events[0];
  assert.ok(card.local === 'permission');
  assert.equal(fake.messages.length, 0, 'no modal while the chat shows the card');
  r.answerPermission(card.requestId, 'allow_always');
  assert.deepEqual(await answer, { outcome: { outcome: 'selected', optionId: 'allow_always' } });
  assert.deepEqual(events.at(-1), { local: 'request_resolved', requestId: card.requestId, answer: 'Always allow `ls` in this session' });
});

test('with the chat hidden, a modal asks; dismissing it answers cancelled', async () => {
  fake.reset();
  const r = new UserRequests(() => {}, () => false);
  fake.messageAnswer = 'Reject';
  assert.deepEqual(await r.requestPermission(params, new CancellationTokenSource().token as never), { outcome: { outcome: 'selected', optionId: 'reject_once' } });
  fake.messageAnswer = undefined;
  assert.deepEqual(await r.requestPermission(params, new CancellationTokenSource().token as never), { outcome: { outcome: 'cancelled' } });
  assert.match(fake.messages[0], /Run `ls`/);
});

test('a request the daemon withdraws closes its card and never hangs', async () => {
  fake.reset();
  const events: LocalEvent[] = [];
  const r = new UserRequests((e) => events.push(e), () => true);
  const source = new CancellationTokenSource();
  const answer = r.requestUserInput({ sessionId: 's', toolCallId: 'c', questions: [{ id: 'q', question: 'Which?' }] }, source.token as never);
  source.cancel();
  assert.deepEqual(await answer, { outcome: 'cancelled' });
  assert.deepEqual(events.at(-1), { local: 'request_resolved', requestId: (events[0] as { requestId: string }).requestId, answer: 'withdrawn' });
});

test('a question answered in the chat returns the answers by id', async () => {
  const events: LocalEvent[] = [];
  const r = new UserRequests((e) => events.push(e), () => true);
  const answer = r.requestUserInput({ sessionId: 's', toolCallId: 'c', questions: [{ id: 'db', question: 'Which?' }] }, new CancellationTokenSource().token as never);
  const card = events[0];
  assert.ok(card.local === 'question');
  r.answerQuestion(card.requestId, { db: 'postgres' });
  assert.deepEqual(await answer, { answers: { db: 'postgres' } });
});
