// Bundles the extension (Node, `vscode` external) and the chat webview's
// script (browser). `--tests` also bundles the unit and protocol tests into
// out/test with `vscode` replaced by test/fake_vscode.ts.
import * as esbuild from 'esbuild';
import * as fs from 'fs';
import * as path from 'path';

const production = process.argv.includes('--production');
const common = { bundle: true, sourcemap: !production, minify: production, logLevel: 'warning' };

await esbuild.build({
  ...common,
  entryPoints: ['src/main.ts'],
  outfile: 'dist/extension.js',
  platform: 'node',
  format: 'cjs',
  target: 'node20',
  external: ['vscode'],
});
await esbuild.build({
  ...common,
  entryPoints: ['webview/chat.ts'],
  outfile: 'dist/chat.js',
  platform: 'browser',
  format: 'iife',
  target: 'es2022',
});

if (process.argv.includes('--tests')) {
  const entries = fs.readdirSync('test').filter((f) => f.endsWith('.test.ts')).map((f) => path.join('test', f));
  await esbuild.build({
    ...common,
    sourcemap: true,
    entryPoints: entries,
    outdir: 'out/test',
    platform: 'node',
    format: 'cjs',
    target: 'node20',
    alias: { vscode: './test/fake_vscode.ts' },
    external: ['playwright-core'],
  });
}
