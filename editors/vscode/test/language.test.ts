/** The pure conversions of src/language.ts: VS Code's values to the wire's LSP shapes. */
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import type * as vscode from 'vscode';
import { lspDiagnostic, lspLocation } from '../src/language';
import { Uri } from './fake_vscode';

const range = (l1: number, c1: number, l2: number, c2: number) =>
  ({ start: { line: l1, character: c1 }, end: { line: l2, character: c2 } }) as unknown as vscode.Range;

test('a diagnostic keeps its range, counts severity from 1, and takes a code object\'s value', () => {
  const d = { range: range(2, 4, 2, 9), severity: 0, message: 'Cannot find name', source: 'ts', code: { value: 2304, target: Uri.parse('https://x') } };
  assert.deepEqual(lspDiagnostic(d as unknown as vscode.Diagnostic), {
    range: { start: { line: 2, character: 4 }, end: { line: 2, character: 9 } },
    severity: 1,
    message: 'Cannot find name',
    source: 'ts',
    code: 2304,
  });
  const hint = { range: range(0, 0, 0, 1), severity: 3, message: 'unused' };
  assert.deepEqual(lspDiagnostic(hint as unknown as vscode.Diagnostic), {
    range: { start: { line: 0, character: 0 }, end: { line: 0, character: 1 } },
    severity: 4,
    message: 'unused',
  });
});

test('a location link points at its target selection', () => {
  const link = { targetUri: Uri.file('/w/lib.ts'), targetRange: range(0, 0, 2, 1), targetSelectionRange: range(0, 16, 0, 21) };
  assert.deepEqual(lspLocation(link as unknown as vscode.LocationLink), {
    uri: 'file:///w/lib.ts',
    range: { start: { line: 0, character: 16 }, end: { line: 0, character: 21 } },
  });
  const plain = { uri: Uri.file('/w/app.ts'), range: range(3, 12, 3, 17) };
  assert.equal(lspLocation(plain as unknown as vscode.Location).uri, 'file:///w/app.ts');
});
