import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { apply, applyAll, emptyTranscript, formatUsage, type Transcript, type TranscriptEvent } from '../src/chat/transcript';
import type { SessionUpdate } from '../src/lsp_ext';
import { contextMeter, currentEfforts } from '../src/chat/models';

const S = 'sess1';
const u = (update: SessionUpdate, turnId = 't1'): TranscriptEvent => ({ sessionId: S, turnId, update });
const chunk = (text: string): TranscriptEvent => u({ sessionUpdate: 'agent_message_chunk', content: { type: 'text', text } });
const usage = { inputTokens: 10, outputTokens: 5, cachedTokens: 4 };

function fresh(): Transcript {
  const t = emptyTranscript();
  apply(t, { local: 'session', sessionId: S });
  return t;
}

test('streamed chunks grow one agent item and bump only its rev', () => {
  const t = fresh();
  applyAll(t, [u({ sessionUpdate: 'user_message', messageId: 'm1', content: [{ type: 'text', text: 'hi' }] }), chunk('Hel'), chunk('lo')]);
  assert.equal(t.items.length, 2);
  const user = t.items[0];
  const agent = t.items[1];
  assert.equal(agent.kind === 'agent' && agent.text, 'Hello');
  const userRev = user.rev;
  apply(t, chunk('!'));
  assert.equal(t.items[0].rev, userRev, 'the user item is not touched by a chunk');
  assert.ok(t.items[1].rev > userRev);
  assert.equal(t.running, true);
});

test('the prompt shown at once is confirmed, not repeated, by the daemon echo', () => {
  const t = fresh();
  apply(t, { local: 'prompt_sent', text: 'explain', attachments: [] });
  apply(t, u({ sessionUpdate: 'user_message', messageId: 'm1', content: [{ type: 'text', text: 'explain' }] }));
  assert.equal(t.items.length, 1);
  assert.equal(t.items[0].kind === 'user' && t.items[0].turnId, 't1');
});

test('agent_message_reset drops the partial text and thoughts of the step, nothing before', () => {
  const t = fresh();
  applyAll(t, [
    u({ sessionUpdate: 'tool_call', toolCallId: 'c1', title: 'Read a.txt', kind: 'read', status: 'pending' }),
    u({ sessionUpdate: 'agent_thought_chunk', content: { type: 'text', text: 'hmm' } }),
    chunk('partial'),
    u({ sessionUpdate: 'agent_message_reset' }),
    chunk('whole'),
  ]);
  assert.deepEqual(t.items.map((i) => i.kind), ['tool', 'agent']);
  assert.equal(t.items[1].kind === 'agent' && t.items[1].text, 'whole');
  assert.equal(t.truncatedFrom, 1, 'the renderer learns where to rebuild from');
});

test('tool calls update in place: status, waiting, streamed output, diff, result', () => {
  const t = fresh();
  applyAll(t, [
    u({ sessionUpdate: 'tool_call', toolCallId: 'c7', title: 'Run `make`', kind: 'execute', status: 'pending' }),
    u({ sessionUpdate: 'tool_call_update', toolCallId: 'c7', status: 'pending', waitingFor: 'permission' }),
  ]);
  const card = t.items[0];
  assert.ok(card.kind === 'tool');
  assert.equal(card.waitingFor, 'permission');
  applyAll(t, [
    u({ sessionUpdate: 'tool_call_update', toolCallId: 'c7', status: 'in_progress' }),
    u({ sessionUpdate: 'tool_call_update', toolCallId: 'c7', outputDelta: 'a\n' }),
    u({ sessionUpdate: 'tool_call_update', toolCallId: 'c7', outputDelta: 'b\n' }),
    u({ sessionUpdate: 'tool_call_update', toolCallId: 'c7', content: [{ type: 'diff', path: '/w/a.txt', oldText: 'x', newText: 'y' }] }),
    u({ sessionUpdate: 'tool_call_update', toolCallId: 'c7', status: 'completed', content: [{ type: 'content', content: { type: 'text', text: 'exit code 0' } }] }),
  ]);
  assert.equal(t.items.length, 1);
  assert.equal(card.waitingFor, undefined);
  assert.equal(card.output, 'a\nb\n');
  assert.equal(card.diffs.length, 1);
  assert.equal(card.status, 'completed');
  assert.equal(card.result, 'exit code 0');
});

test('the plan is one checklist updated in place within a turn', () => {
  const t = fresh();
  const plan = (status: 'pending' | 'completed'): TranscriptEvent =>
    u({ sessionUpdate: 'plan', entries: [{ content: 'step', priority: 'medium', status }] });
  applyAll(t, [plan('pending'), chunk('working'), plan('completed')]);
  assert.deepEqual(t.items.map((i) => i.kind), ['plan', 'agent']);
  assert.equal(t.items[0].kind === 'plan' && t.items[0].entries[0].status, 'completed');
});

test('turn_end ends the running state and keeps stop reason and usage', () => {
  const t = fresh();
  applyAll(t, [chunk('x'), u({ sessionUpdate: 'turn_end', stopReason: 'cancelled', message: 'cancelled by the user', usage })]);
  assert.equal(t.running, false);
  const end = t.items[1];
  assert.ok(end.kind === 'turn_end');
  assert.equal(end.stopReason, 'cancelled');
  assert.equal(formatUsage(end.usage), '10 in · 5 out · 4 cached');
  assert.equal(formatUsage({ ...usage, costUsd: 0.00012 }), '10 in · 5 out · 4 cached · $0.0001');
});

test('updates of another session are ignored; switching sessions clears the view', () => {
  const t = fresh();
  apply(t, { sessionId: 'other', turnId: 't1', update: { sessionUpdate: 'agent_message_chunk', content: { type: 'text', text: 'no' } } });
  assert.equal(t.items.length, 0);
  apply(t, chunk('yes'));
  apply(t, { local: 'session', sessionId: 'other' });
  assert.equal(t.items.length, 0);
  assert.equal(t.sessionId, 'other');
});

test('permission and question cards are answered in place; proposals attach to their tool card', () => {
  const t = fresh();
  applyAll(t, [
    u({ sessionUpdate: 'tool_call', toolCallId: 'p1', title: 'Patch: Update a.txt (1 hunk)', kind: 'edit', status: 'pending' }),
    { local: 'proposal', toolCallId: 'p1', proposal: { id: 'p1', label: 'Update a.txt', files: ['a.txt'] } },
    { local: 'permission', requestId: 'r1', toolCallId: 'c2', title: 'Run `ls`', options: [] },
    { local: 'question', requestId: 'r2', toolCallId: 'c3', questions: [{ id: 'db', question: 'Which?' }] },
    { local: 'request_resolved', requestId: 'r1', answer: 'Allow once' },
    { local: 'request_resolved', requestId: 'r2', answer: 'sqlite' },
    { local: 'proposal_resolved', toolCallId: 'p1', outcome: 'accepted' },
  ]);
  const [tool, perm, question] = t.items;
  assert.ok(tool.kind === 'tool' && perm.kind === 'permission' && question.kind === 'question');
  assert.equal(tool.proposal?.outcome, 'accepted');
  assert.equal(perm.answer, 'Allow once');
  assert.equal(question.answer, 'sqlite');
});

test('the transcript is plain JSON: a snapshot round-trips through postMessage/setState', () => {
  const t = fresh();
  applyAll(t, [chunk('a'), u({ sessionUpdate: 'tool_call', toolCallId: 'c', title: 'T', kind: 'read', status: 'pending' })]);
  const copy = JSON.parse(JSON.stringify(t)) as Transcript;
  apply(copy, u({ sessionUpdate: 'tool_call_update', toolCallId: 'c', status: 'completed' }));
  assert.equal(copy.items[1].kind === 'tool' && copy.items[1].status, 'completed');
});

test('folding 5,000 updates takes well under 100 ms', () => {
  const t = fresh();
  const started = performance.now();
  for (let i = 0; i < 5000; i++) {
    if (i % 100 === 0) apply(t, u({ sessionUpdate: 'tool_call', toolCallId: `c${i}`, title: 'Read', kind: 'read', status: 'pending' }));
    else apply(t, chunk(`chunk ${i} `));
  }
  const ms = performance.now() - started;
  assert.ok(ms < 100, `took ${ms} ms`);
});

test('the model picker state follows the answers and current_model_update; the meter the usage', () => {
  const t = emptyTranscript();
  const models = {
    model: 'default',
    models: [
      { id: 'default', name: 'big', efforts: [], contextWindow: 64000 },
      { id: 'fast', name: 'small', efforts: ['low', 'high'], contextWindow: 32000 },
    ],
  };
  apply(t, { local: 'session', sessionId: S, models });
  assert.deepEqual(currentEfforts(t), []);
  assert.equal(contextMeter(t), undefined, 'no call yet');
  apply(t, u({ sessionUpdate: 'current_model_update', modelId: 'fast', name: 'small', effort: 'low' }));
  assert.equal(t.models?.model, 'fast');
  assert.deepEqual(currentEfforts(t), ['low', 'high']);
  const priced = { ...usage, costUsd: 0.02 };
  apply(t, u({ sessionUpdate: 'usage', call: priced, turn: priced, session: priced, context: { used: 16000, size: 32000 } }));
  const meter = contextMeter(t);
  assert.equal(meter?.text, '16.0k / 32.0k (50%)');
  assert.equal(meter?.ratio, 0.5);
  assert.equal(meter?.tooltip, 'Context: 16,000 of 32,000 tokens (50%)\nLast call: 10 in · 5 out\nTurn cost: $0.0200\nSession cost: $0.0200');
  // A compaction: the figure drops.
  apply(t, u({ sessionUpdate: 'usage', call: usage, turn: priced, session: priced, context: { used: 4000, size: 32000 } }));
  assert.equal(contextMeter(t)?.text, '4.0k / 32.0k (13%)');
  apply(t, { local: 'session', sessionId: 'other' });
  assert.equal(contextMeter(t), undefined, 'another session starts empty');
});

test('a conversation rewind greys out the dropped messages and what answered them; a files-only one changes nothing', () => {
  const t = fresh();
  const turn = (id: string, text: string, answer: string, turnId: string): void => {
    apply(t, { sessionId: S, turnId, update: { sessionUpdate: 'user_message', messageId: id, content: [{ type: 'text', text }] } });
    apply(t, { sessionId: S, turnId, update: { sessionUpdate: 'agent_message_chunk', content: { type: 'text', text: answer } } });
  };
  turn('m1', 'first', 'one', 't1');
  turn('m2', 'second', 'two', 't2');
  turn('m3', 'third', 'three', 't3');
  apply(t, u({ sessionUpdate: 'rewound', rewindId: 'rw1', toMessageId: 'm2', conversation: false, droppedMessageIds: [] }));
  assert.deepEqual(t.items.map((i) => i.rewound ?? false), [false, false, false, false, false, false]);
  const rev = t.rev;
  apply(t, u({ sessionUpdate: 'rewound', rewindId: 'rw2', toMessageId: 'm2', conversation: true, droppedMessageIds: ['m2', 'm3'] }));
  assert.deepEqual(t.items.map((i) => i.rewound ?? false), [false, false, true, true, true, true]);
  assert.ok(t.items.slice(2).every((i) => i.rev > rev), 'the greyed items are redrawn');
  // A new prompt after the rewind is not greyed out.
  turn('m4', 'again', 'four', 't4');
  assert.equal(t.items[t.items.length - 1].rewound, undefined);
  // A redo of rw2 brings m2 and m3 back.
  apply(t, u({ sessionUpdate: 'rewound', rewindId: 'rw3', toMessageId: 'rw2', conversation: true, droppedMessageIds: [], restoredMessageIds: ['m2', 'm3'] }));
  assert.deepEqual(t.items.map((i) => i.rewound ?? false), [false, false, false, false, false, false, false, false]);
});
