/**
 * A real VS Code in a real browser: code-server (VS Code 1.139.1 served over
 * HTTP, installed by scripts/install-test-host.sh) with the packaged .vsix
 * installed, driven by playwright-core in Debian's headless Chromium. Each
 * Workbench gets fresh user-data, extensions and TANDEM_HOME directories and
 * a workspace folder; the daemon is the real binary and the model the
 * scripted server of the test.
 */
import * as assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { chromium, type BrowserContext, type Frame, type Page } from 'playwright-core';
import { MODEL_NAME, type ModelServer } from '../support/model_server';
import { tandemBinary } from '../support/daemon';

export const EXT_ROOT = path.resolve(__dirname, '../..');
const CHROMIUM = process.env.TANDEM_CHROMIUM ?? '/usr/bin/chromium';
export const CHROMIUM_ARGS = [
  '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
];

/** Why the e2e tests cannot run here, or undefined when they can. */
export function unavailable(): string | undefined {
  if (!process.env.CODE_SERVER || !fs.existsSync(process.env.CODE_SERVER)) return 'CODE_SERVER is not set (scripts/test installs code-server)';
  if (!process.env.NODE24_BIN || !fs.existsSync(path.join(process.env.NODE24_BIN, 'node'))) return 'NODE24_BIN is not set';
  if (!fs.existsSync(CHROMIUM)) return `no Chromium at ${CHROMIUM}`;
  if (!vsixPath()) return 'no packaged tandem-*.vsix (npm run package)';
  return undefined;
}

function vsixPath(): string | undefined {
  const f = fs.readdirSync(EXT_ROOT).find((n) => /^tandem-.*\.vsix$/.test(n));
  return f ? path.join(EXT_ROOT, f) : undefined;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
    s.on('error', reject);
  });
}

export class Workbench {
  page!: Page;
  private context!: BrowserContext;
  private server!: ChildProcess;
  readonly dir: string;
  readonly folder: string;
  readonly home: string;
  private readonly userData: string;
  private readonly extensions: string;
  private port = 0;
  readonly serverLog: string[] = [];

  constructor(private readonly model: ModelServer, home?: string) {
    this.dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tandem-e2e-'));
    this.folder = path.join(this.dir, 'project');
    this.home = home ?? path.join(this.dir, 'tandem-home');
    this.userData = path.join(this.dir, 'user-data');
    this.extensions = path.join(this.dir, 'extensions');
    for (const d of [this.folder, this.home, path.join(this.userData, 'User'), this.extensions]) fs.mkdirSync(d, { recursive: true });
  }

  write(rel: string, text: string): void {
    fs.writeFileSync(path.join(this.folder, rel), text);
  }

  read(rel: string): string {
    return fs.readFileSync(path.join(this.folder, rel), 'utf8');
  }

  private env(): NodeJS.ProcessEnv {
    return { ...process.env, PATH: `${process.env.NODE24_BIN}${path.delimiter}${process.env.PATH}`, TANDEM_HOME: this.home, TANDEM_FSYNC: '0' };
  }

  async start(settings: Record<string, unknown> = {}): Promise<void> {
    const install = spawnSync(process.env.CODE_SERVER!, [
      '--install-extension', vsixPath()!, '--extensions-dir', this.extensions, '--user-data-dir', this.userData,
    ], { env: this.env(), encoding: 'utf8' });
    if (install.status !== 0) throw new Error(`installing the .vsix failed: ${install.stdout}${install.stderr}`);
    fs.writeFileSync(path.join(this.userData, 'User', 'settings.json'), JSON.stringify({
      'security.workspace.trust.enabled': false,
      'workbench.startupEditor': 'none',
      'workbench.tips.enabled': false,
      'telemetry.telemetryLevel': 'off',
      'extensions.autoCheckUpdates': false,
      'extensions.autoUpdate': false,
      'chat.disableAIFeatures': true,
      'files.autoSave': 'off',
      'tandem.path': tandemBinary(),
      'tandem.model.baseUrl': this.model.baseUrl,
      'tandem.model.name': MODEL_NAME,
      'tandem.model.apiKeyEnv': 'TANDEM_TEST_NO_KEY',
      ...settings,
    }, null, 2));
    this.port = await freePort();
    this.server = spawn(process.env.CODE_SERVER!, [
      '--auth', 'none', '--bind-addr', `127.0.0.1:${this.port}`, '--extensions-dir', this.extensions,
      '--user-data-dir', this.userData, '--disable-telemetry', '--disable-update-check', '--disable-workspace-trust',
      '--disable-getting-started-override', this.folder,
    ], { env: this.env(), stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    const ready = new Promise<void>((resolve, reject) => {
      const onData = (d: Buffer) => {
        this.serverLog.push(d.toString());
        if (/HTTP server listening/.test(d.toString())) resolve();
      };
      this.server.stdout!.on('data', onData);
      this.server.stderr!.on('data', onData);
      this.server.on('exit', (code) => reject(new Error(`code-server exited (${code}): ${this.serverLog.join('')}`)));
      setTimeout(() => reject(new Error(`code-server did not listen within 60 s: ${this.serverLog.join('')}`)), 60_000);
    });
    await ready;
    this.context = await chromium.launchPersistentContext(path.join(this.dir, 'chromium'), {
      executablePath: CHROMIUM,
      args: CHROMIUM_ARGS,
      headless: true,
      viewport: { width: 1400, height: 900 },
    });
    this.page = this.context.pages()[0] ?? (await this.context.newPage());
    await this.open();
  }

  /** (Re)loads the workbench and waits until it is ready. */
  async open(): Promise<void> {
    await this.page.goto(`http://127.0.0.1:${this.port}/?folder=${encodeURIComponent(this.folder)}`);
    await this.page.waitForSelector('.monaco-workbench', { timeout: 60_000 });
    await this.page.locator('.statusbar-item', { hasText: 'tandem' }).first().waitFor({ timeout: 60_000 });
    // Keys go to the page only once something in it has focus.
    await this.page.locator('.part.editor').click();
  }

  async command(title: string): Promise<void> {
    await this.page.keyboard.press('F1');
    const input = this.page.locator('.quick-input-widget input');
    await input.waitFor();
    await input.fill(`>${title}`);
    await this.page.locator('.quick-input-list .monaco-list-row', { hasText: title }).first().waitFor();
    await this.page.keyboard.press('Enter');
  }

  /** Opens a file of the folder in an editor through Quick Open. */
  async openFile(rel: string): Promise<void> {
    await this.page.keyboard.press('F1');
    const input = this.page.locator('.quick-input-widget input');
    await input.waitFor();
    await input.fill(rel);
    await this.page.locator('.quick-input-list .monaco-list-row', { hasText: rel }).first().waitFor({ timeout: 30_000 });
    await this.page.keyboard.press('Enter');
    await this.page.locator(`.tab[aria-label*="${rel}"]`).first().waitFor();
    await this.page.locator('.editor-group-container.active .monaco-editor .view-lines').first().click();
  }

  /** The text of the active editor's visible lines. */
  async editorText(): Promise<string> {
    return this.page.evaluate(() => {
      const lines = [...document.querySelectorAll('.editor-group-container.active .monaco-editor .view-lines .view-line')] as HTMLElement[];
      return lines
        .map((l) => ({ top: parseFloat(l.style.top), text: (l.textContent ?? '').replace(/\u00a0/g, ' ') }))
        .sort((a, b) => a.top - b.top)
        .map((l) => l.text)
        .join('\n');
    });
  }

  /**
   * Waits until the active editor's rendered text matches `re`: Monaco renders
   * keystrokes and edits on its next animation frame, so one read right after
   * typing can miss the last key. Fails with the last text read.
   */
  async expectEditorText(re: RegExp, message?: string, timeoutMs = 10_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    let last = await this.editorText();
    while (!re.test(last) && Date.now() < deadline) {
      await this.page.waitForTimeout(50);
      last = await this.editorText();
    }
    assert.match(last, re, message);
  }

  /** The chat webview's inner frame (VS Code nests the content in two iframes). */
  async chat(): Promise<Frame> {
    const deadline = Date.now() + 30_000;
    for (;;) {
      for (const f of this.page.frames()) {
        if (f.url().includes('webview') && (await f.locator('textarea.prompt').count().catch(() => 0)) > 0) return f;
      }
      if (Date.now() > deadline) throw new Error('the chat view did not appear');
      await this.page.waitForTimeout(100);
    }
  }

  async openChat(): Promise<Frame> {
    await this.command('tandem: Open Chat');
    return this.chat();
  }

  async send(chat: Frame, text: string): Promise<void> {
    const box = chat.locator('textarea.prompt');
    await box.fill(text);
    await box.press('Enter');
  }

  async screenshot(name: string): Promise<string | undefined> {
    const dir = process.env.TANDEM_E2E_ARTIFACTS ?? path.join(EXT_ROOT, 'out', 'e2e-artifacts');
    fs.mkdirSync(dir, { recursive: true });
    const file = path.join(dir, `${name.replace(/[^a-z0-9]+/gi, '-')}.png`);
    try {
      await this.page.screenshot({ path: file });
      return file;
    } catch {
      return undefined;
    }
  }

  /** Closes the browser and code-server, and removes the directories (kept with TANDEM_E2E_KEEP=1). */
  async stop(): Promise<void> {
    await this.context?.close().catch(() => {});
    if (this.server?.pid) {
      const exited = new Promise<void>((resolve) => {
        if (this.server.exitCode !== null) resolve();
        else this.server.once('exit', () => resolve());
      });
      try {
        process.kill(-this.server.pid, 'SIGTERM');
        await Promise.race([exited, new Promise((r) => setTimeout(r, 5000))]);
      } catch {
        // already gone
      }
    }
    if (process.env.TANDEM_E2E_KEEP !== '1') fs.rmSync(this.dir, { recursive: true, force: true });
  }
}
