/**
 * The packaged .vsix (built by `npm run package`, as CI does): its manifest
 * contributes what the docs promise, its entry point is in the package, and
 * nothing but the two bundles and media ships (no node_modules, no dev
 * dependencies).
 */
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';

const root = path.resolve(__dirname, '../..');
const vsix = fs.readdirSync(root).find((n) => /^tandem-.*\.vsix$/.test(n));

/** Reads a zip with Python's zipfile (python3 is on every machine that runs the suite). */
function zip(op: 'list' | 'read', member?: string): string {
  const script = op === 'list'
    ? 'import sys, zipfile; print("\\n".join(zipfile.ZipFile(sys.argv[1]).namelist()))'
    : 'import sys, zipfile; sys.stdout.write(zipfile.ZipFile(sys.argv[1]).read(sys.argv[2]).decode())';
  return execFileSync('python3', ['-c', script, path.join(root, vsix!), ...(member ? [member] : [])], { encoding: 'utf8', maxBuffer: 64 << 20 });
}

test('the .vsix ships the bundles and media only, and its manifest contributes the documented surface', { skip: vsix ? false : 'no tandem-*.vsix: run npm run package' }, () => {
  const files = zip('list').split('\n').filter(Boolean);
  assert.ok(!files.some((f) => f.includes('node_modules/')), 'no node_modules in the package');
  assert.ok(!files.some((f) => f.endsWith('.map') || f.endsWith('.ts')), 'no sources or source maps');
  for (const f of ['extension/package.json', 'extension/dist/extension.js', 'extension/dist/chat.js', 'extension/media/chat.css']) {
    assert.ok(files.includes(f), `${f} is packaged`);
  }
  const manifest = JSON.parse(zip('read', 'extension/package.json')) as {
    main: string; activationEvents: string[]; engines: { vscode: string };
    contributes: {
      commands: { command: string }[]; keybindings: { command: string; key: string; when?: string }[];
      views: Record<string, { id: string; type?: string }[]>; configuration: { properties: Record<string, unknown> };
    };
  };
  assert.ok(files.includes(`extension/${manifest.main.replace(/^\.\//, '')}`), 'main is in the package');
  assert.deepEqual(manifest.activationEvents, ['onStartupFinished']);
  assert.equal(manifest.engines.vscode, '^1.91.0');
  const commands = manifest.contributes.commands.map((c) => c.command);
  for (const c of ['tandem.editSelection', 'tandem.explainSelection', 'tandem.fixSelection', 'tandem.runTask', 'tandem.openSession', 'tandem.cancel']) {
    assert.ok(commands.includes(c), `${c} is contributed (DESIGN.md fixes the name)`);
  }
  const keys = new Map(manifest.contributes.keybindings.map((k) => [k.command, k]));
  for (const c of ['tandem.editSelection', 'tandem.explainSelection', 'tandem.fixSelection', 'tandem.runTask']) {
    assert.ok(keys.get(c)?.key, `${c} has a default key`);
  }
  assert.ok(!keys.get('tandem.editSelection')!.key.startsWith('ctrl+i'), 'Ctrl+I is VS Code\'s (suggest, inline chat)');
  assert.deepEqual(manifest.contributes.views.tandem, [{ type: 'webview', id: 'tandem.chat', name: 'Chat' }]);
  for (const s of ['tandem.path', 'tandem.model.baseUrl', 'tandem.model.name', 'tandem.approvalMode', 'tandem.logLevel']) {
    assert.ok(s in manifest.contributes.configuration.properties, `setting ${s}`);
  }
  const bundle = zip('read', 'extension/dist/extension.js');
  for (const dev of ['playwright-core', 'typescript-eslint', '@vscode/vsce']) {
    assert.ok(!bundle.includes(dev), `${dev} (a dev dependency) is not bundled`);
  }
  assert.ok(bundle.length < 1_000_000, `the bundle is ${bundle.length} bytes`);
});
