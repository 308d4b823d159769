import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import type { ApplyWorkspaceEditParams } from 'vscode-languageserver-protocol';
import { applyTextEdits, filesOf, needsConfirmation, offsetAt, toolCallIdOf, withoutConfirmation } from '../src/review_edits';
import { Review } from '../src/review';
import { fake, Uri } from './fake_vscode';
import type { LocalEvent } from '../src/chat/transcript';

const range = (l1: number, c1: number, l2: number, c2: number) => ({ start: { line: l1, character: c1 }, end: { line: l2, character: c2 } });

function patch(needs: boolean): ApplyWorkspaceEditParams {
  return {
    label: 'Update a.txt (1 hunk)',
    edit: {
      documentChanges: [{ textDocument: { uri: 'file:///w/a.txt', version: 3 }, edits: [{ range: range(1, 0, 1, 5), newText: 'BETA', annotationId: 'tandem-patch-call_1' }] }],
      changeAnnotations: { 'tandem-patch-call_1': { label: 'Update a.txt', needsConfirmation: needs, description: 'Proposed by the tandem agent (apply_patch)' } },
    },
  };
}

test('edits apply on UTF-16 offsets, against the original text, past-the-end clamped', () => {
  const text = 'a😀b\nbeta\r\ngamma';
  assert.equal(offsetAt(text, 0, 3), 3, 'the emoji is two UTF-16 units');
  assert.equal(offsetAt(text, 1, 99), 9, 'past the end of a CRLF line is before the CR');
  assert.equal(applyTextEdits(text, [{ range: range(2, 0, 2, 5), newText: 'G' }, { range: range(0, 1, 0, 3), newText: '' }]), 'ab\nbeta\r\nG');
  assert.throws(() => applyTextEdits('abc', [{ range: range(0, 0, 0, 2), newText: '' }, { range: range(0, 1, 0, 3), newText: '' }]));
});

test('the proposal knows its tool call and files; accept-all strips needsConfirmation only', () => {
  const p = patch(true);
  assert.equal(toolCallIdOf(p), 'call_1');
  assert.deepEqual(filesOf(p), ['file:///w/a.txt']);
  assert.ok(needsConfirmation(p));
  const stripped = withoutConfirmation(p);
  assert.ok(!needsConfirmation(stripped));
  assert.ok(needsConfirmation(p), 'the original is untouched');
});

function setup() {
  fake.reset();
  const events: LocalEvent[] = [];
  const review = new Review((e) => events.push(e));
  let text = 'alpha\nbeta\n';
  const doc = { uri: Uri.parse('file:///w/a.txt'), getText: () => text, version: 3 };
  fake.documents.push(doc);
  const applied: ApplyWorkspaceEditParams[] = [];
  const next = (p: ApplyWorkspaceEditParams) => {
    applied.push(p);
    const change = p.edit.documentChanges![0] as { edits: { range: ReturnType<typeof range>; newText: string }[] };
    text = applyTextEdits(text, change.edits);
    return { applied: true };
  };
  return { review, events, applied, next, text: () => text };
}

test('auto-mode edits (no confirmation) go straight through', async () => {
  const s = setup();
  const r = await s.review.handleApplyEdit(patch(false), s.next);
  assert.deepEqual(r, { applied: true });
  assert.equal(s.events.length, 0);
});

test('Accept applies the whole proposal to the buffer and answers applied', async () => {
  const s = setup();
  const answer = s.review.handleApplyEdit(patch(true), s.next);
  assert.equal(s.events[0].local, 'proposal');
  assert.equal(s.applied.length, 0, 'nothing lands before the user decides');
  await s.review.accept('call_1');
  assert.deepEqual(await answer, { applied: true });
  assert.equal(s.text(), 'alpha\nBETA\n');
  assert.ok(!needsConfirmation(s.applied[0]));
  assert.deepEqual(s.events.at(-1), { local: 'proposal_resolved', toolCallId: 'call_1', outcome: 'accepted' });
});

test('Reject answers applied:false with the reason and touches nothing', async () => {
  const s = setup();
  const answer = s.review.handleApplyEdit(patch(true), s.next);
  s.review.reject('call_1', 'not like this');
  assert.deepEqual(await answer, { applied: false, failureReason: 'not like this' });
  assert.equal(s.text(), 'alpha\nbeta\n');
});

test('a preview that applied nothing is answered applied:false, truthfully', async () => {
  const s = setup();
  const answer = s.review.handleApplyEdit(patch(true), () => ({ applied: true }));
  await s.review.preview('call_1');
  const r = await answer;
  assert.equal(r.applied, false);
});

test('the diff shows current vs. proposed text', async () => {
  const s = setup();
  void s.review.handleApplyEdit(patch(true), s.next);
  await s.review.openDiff('call_1');
  const diff = fake.executed.find((e) => e.command === 'vscode.diff');
  assert.ok(diff);
  const right = diff.args[1] as Uri;
  assert.equal(right.scheme, 'tandem-proposed');
  assert.equal(await s.review.provideTextDocumentContent(right as never), 'alpha\nBETA\n');
  assert.equal(Review.toolCallIdOfUri(right as never), 'call_1');
});
