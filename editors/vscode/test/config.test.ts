import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { daemonEnv, initializationOptions, type Inspected } from '../src/config';
import { doctorHint, protocolVersionOf, resolveBinary, sandboxWarningOf } from '../src/binary';
import { isRunTaskArgs, taskChoices } from '../src/task_choices';

function settings(values: Record<string, Inspected<unknown>>) {
  return (key: string) => values[key];
}

test('only settings the user set reach initializationOptions, nested as config.toml keys', () => {
  const opts = initializationOptions(settings({
    'model.baseUrl': { globalValue: 'http://127.0.0.1:8080/v1' },
    'model.name': { globalValue: 'a', workspaceValue: 'b' },
    'model.provider': {},
    approvalMode: { workspaceFolderValue: 'auto', globalValue: 'review' },
  }));
  assert.deepEqual(opts, { model: { base_url: 'http://127.0.0.1:8080/v1', name: 'b' }, approval: { mode: 'auto' } });
});

test('nothing set: no initializationOptions at all, so the daemon configuration stays in force', () => {
  assert.deepEqual(initializationOptions(() => undefined), {});
});

test('the API key from secret storage goes into the variable the daemon reads', () => {
  assert.equal(daemonEnv({}, { apiKey: 'sk-1' }).OPENAI_API_KEY, 'sk-1');
  assert.equal(daemonEnv({}, { apiKey: 'sk-1', provider: 'anthropic' }).ANTHROPIC_API_KEY, 'sk-1');
  assert.equal(daemonEnv({}, { apiKey: 'sk-1', apiKeyEnv: 'MY_KEY' }).MY_KEY, 'sk-1');
  const env = daemonEnv({ PATH: '/bin' }, { logLevel: 'debug' });
  assert.deepEqual(env, { PATH: '/bin', TANDEM_LOG: 'debug' });
});

test('binary: the setting wins, then PATH, then target/release of the tandem repository', () => {
  const exec = new Set(['/usr/bin/tandem', '/repo/target/release/tandem', '/repo/target/debug/tandem', '/opt/t']);
  const probe = (pathDirs: string[]) => ({
    isExecutable: (p: string) => exec.has(p),
    pathDirs,
    workspaceFolders: ['/other', '/repo'],
    isTandemRepo: (f: string) => f === '/repo',
  });
  assert.deepEqual(resolveBinary('/opt/t', probe(['/usr/bin'])), { ok: true, path: '/opt/t', from: 'setting' });
  assert.deepEqual(resolveBinary('', probe(['/usr/bin'])), { ok: true, path: '/usr/bin/tandem', from: 'PATH' });
  assert.deepEqual(resolveBinary(undefined, probe(['/nope'])), { ok: true, path: '/repo/target/release/tandem', from: 'workspace' });
  const missing = resolveBinary('/missing', probe(['/usr/bin']));
  assert.equal(missing.ok, false, 'a wrong setting is reported, not silently replaced');
});

test('protocol version is read from the initialize result', () => {
  assert.equal(protocolVersionOf({ experimental: { tandem: { protocolVersion: 1 } } }), 1);
  assert.equal(protocolVersionOf({}), undefined);
});

test('a daemon without the exec sandbox is reported once, with its reason; one with it or too old to say is not', () => {
  const reason = 'exec sandbox unavailable: no Landlock; every command asks permission, even in auto mode';
  assert.equal(sandboxWarningOf({ experimental: { tandem: { sandbox: { available: false, reason } } } }), `tandem: ${reason}`);
  assert.equal(sandboxWarningOf({ experimental: { tandem: { sandbox: { available: true, landlockAbi: 7 } } } }), undefined);
  assert.equal(sandboxWarningOf({ experimental: { tandem: {} } }), undefined);
});

test('"Show log" points to `tandem doctor` with the binary that was started, quoted when it has spaces', () => {
  assert.match(doctorHint('/usr/local/bin/tandem'), /run `\/usr\/local\/bin\/tandem doctor` in a terminal/);
  assert.match(doctorHint('/opt/my tools/tandem'), /run `"\/opt\/my tools\/tandem" doctor`/);
  assert.match(doctorHint(undefined), /run `tandem doctor`/);
});

test('task choices: built-ins, overrides, disabled and configured tasks', () => {
  const choices = taskChoices({ fix: { enabled: false }, explain: { title: 'Explain it' }, lint: { title: 'Lint' } });
  assert.deepEqual(choices.map((c) => c.id), ['explain', 'edit', 'tests', 'document', 'lint']);
  assert.equal(choices[0].title, 'Explain it');
  assert.ok(isRunTaskArgs({ task: 'fix', uri: 'file:///a', range: { start: {}, end: {} } }));
  assert.ok(!isRunTaskArgs(undefined));
  assert.ok(!isRunTaskArgs({ task: 'fix' }));
});
