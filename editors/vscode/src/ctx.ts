/**
 * The extension's context: it alone owns the daemon's language client
 * (start, stop, restart), the output channel and the status bar item. Two
 * disposal scopes: `clientDisposables` live as long as one client,
 * `extCtx.subscriptions` as long as the extension.
 */
import * as fs from 'fs';
import * as path from 'path';
import * as vscode from 'vscode';
import { CancellationToken, type LanguageClient } from 'vscode-languageclient/node';
import { createClient } from './client';
import { doctorHint, MIN_PROTOCOL_VERSION, protocolVersionOf, resolveBinary, sandboxWarningOf } from './binary';
import { daemonEnv, initializationOptions, SECRET_API_KEY, userSet } from './config';
import { LanguageFeatures } from './language';
import * as ext from './lsp_ext';
import type { Review } from './review';
import type { UserRequests } from './requests';

export interface UpdateSink {
  onUpdate(params: ext.UpdateParams): void;
  onClientChanged(running: boolean): void;
}

export class Ctx implements vscode.Disposable {
  client: LanguageClient | undefined;
  readonly output: vscode.LogOutputChannel;
  private readonly status: vscode.StatusBarItem;
  private clientDisposables: vscode.Disposable[] = [];
  private starting: Promise<LanguageClient | undefined> | undefined;
  mode: ext.ApprovalMode | undefined;
  /** The daemon binary of the last start, for `tandem doctor`'s hint. */
  private binary: string | undefined;

  constructor(
    readonly extCtx: vscode.ExtensionContext,
    private readonly review: Review,
    private readonly requests: UserRequests,
    private readonly sink: UpdateSink,
  ) {
    this.output = vscode.window.createOutputChannel('tandem', { log: true });
    this.status = vscode.window.createStatusBarItem('tandem.status', vscode.StatusBarAlignment.Right, 100);
    this.status.name = 'tandem';
    this.status.command = 'tandem.openChat';
    extCtx.subscriptions.push(this.output, this.status);
    this.setStatus('stopped');
    this.status.show();
  }

  dispose(): void {
    void this.stop();
  }

  /** The running client, starting it if needed; undefined (after telling the user) if it cannot start. */
  async ensureClient(): Promise<LanguageClient | undefined> {
    if (this.client?.isRunning()) return this.client;
    this.starting ??= this.start().finally(() => (this.starting = undefined));
    return this.starting;
  }

  async restart(): Promise<void> {
    await this.stop();
    await this.ensureClient();
  }

  async stop(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    for (const d of this.clientDisposables) d.dispose();
    this.clientDisposables = [];
    this.review.withdrawAll('the daemon was stopped', true);
    if (client) {
      try {
        await client.stop(2000);
      } catch (e) {
        this.output.info(`tandem: stopping the daemon failed: ${String(e)}`);
      }
    }
    this.setStatus('stopped');
    this.sink.onClientChanged(false);
  }

  setMode(mode: ext.ApprovalMode | undefined): void {
    this.mode = mode;
    if (this.client?.isRunning()) this.setStatus('running');
  }

  /** The chat session's model (name sent to the server), for the status bar. */
  modelName: string | undefined;

  setModelName(name: string | undefined): void {
    this.modelName = name;
    if (this.client?.isRunning()) this.setStatus('running');
  }

  private config(): vscode.WorkspaceConfiguration {
    return vscode.workspace.getConfiguration('tandem');
  }

  private async start(): Promise<LanguageClient | undefined> {
    const cfg = this.config();
    const folders = (vscode.workspace.workspaceFolders ?? []).map((f) => f.uri.fsPath);
    const resolution = resolveBinary(cfg.get<string>('path'), {
      isExecutable: (p) => {
        try {
          fs.accessSync(p, fs.constants.X_OK);
          return fs.statSync(p).isFile();
        } catch {
          return false;
        }
      },
      pathDirs: (process.env.PATH ?? '').split(path.delimiter),
      workspaceFolders: folders,
      isTandemRepo: (f) => {
        try {
          return /^name\s*=\s*"tandem"/m.test(fs.readFileSync(path.join(f, 'Cargo.toml'), 'utf8'));
        } catch {
          return false;
        }
      },
    });
    if (!resolution.ok) {
      this.setStatus('error', 'tandem binary not found');
      void this.offerSetPath(`tandem was not found (tried ${resolution.tried.join(', ')}). Install it or set \`tandem.path\`.`);
      return undefined;
    }
    const inspect = (key: string) => cfg.inspect(key);
    const apiKey = await this.extCtx.secrets.get(SECRET_API_KEY);
    const env = daemonEnv(process.env, {
      logLevel: userSet(cfg.inspect<string>('logLevel')),
      apiKey,
      apiKeyEnv: userSet(cfg.inspect<string>('model.apiKeyEnv')),
      provider: userSet(cfg.inspect<string>('model.provider')),
    });
    this.binary = resolution.path;
    this.output.info(`tandem: starting ${resolution.path} lsp (found via ${resolution.from})`);
    const client = createClient({
      binary: resolution.path,
      env,
      initializationOptions: initializationOptions(inspect),
      outputChannel: this.output,
      middleware: {
        workspace: {
          handleApplyEdit: (params, next) => this.review.handleApplyEdit(params, (p) => next(p, CancellationToken.None) as never),
        },
      },
    });
    this.clientDisposables.push(
      client.onNotification(ext.update, (p) => {
        if (p.update.sessionUpdate === 'current_mode_update') this.setMode(p.update.currentModeId);
        if (p.update.sessionUpdate === 'turn_end') this.review.withdrawAll('the turn ended');
        this.sink.onUpdate(p);
      }),
      client.onRequest(ext.requestPermission, (p, token) => this.requests.requestPermission(p, token)),
      client.onRequest(ext.requestUserInput, (p, token) => this.requests.requestUserInput(p, token)),
      ...this.languageFeatures(client),
    );
    this.setStatus('starting');
    try {
      await client.start();
    } catch (e) {
      this.setStatus('error', String(e));
      void this.offerSetPath(`tandem could not start: ${e instanceof Error ? e.message : String(e)}`);
      return undefined;
    }
    const version = protocolVersionOf(client.initializeResult?.capabilities);
    if (version === undefined || version < MIN_PROTOCOL_VERSION) {
      await client.stop();
      this.setStatus('error', 'tandem is too old');
      void this.offerSetPath(
        `${resolution.path} is too old for this extension (protocol ${version ?? 'unknown'}, needs ${MIN_PROTOCOL_VERSION}). Update tandem or set \`tandem.path\`.`,
      );
      return undefined;
    }
    // Commands will ask every time, even in auto mode: say why, once per start.
    const sandboxWarning = sandboxWarningOf(client.initializeResult?.capabilities);
    if (sandboxWarning) {
      this.output.appendLine(sandboxWarning);
      void vscode.window.showWarningMessage(sandboxWarning);
    }
    this.client = client;
    this.language?.reportAll();
    this.setStatus('running');
    this.sink.onClientChanged(true);
    return client;
  }

  /** The language features of this client: its requests answered, its diagnostics reported. */
  private language: LanguageFeatures | undefined;
  private languageFeatures(client: LanguageClient): vscode.Disposable[] {
    const language = new LanguageFeatures((p) => void client.sendNotification(ext.diagnosticsChanged, p));
    this.language = language;
    return [
      language,
      client.onRequest(ext.diagnostics, (p) => language.diagnostics(p)),
      client.onRequest(ext.definition, (p) => language.definition(p)),
      client.onRequest(ext.references, (p) => language.references(p)),
      client.onRequest(ext.workspaceSymbols, (p) => language.workspaceSymbols(p)),
    ];
  }

  private async offerSetPath(message: string): Promise<void> {
    const pick = await vscode.window.showErrorMessage(message, 'Set path', 'Show log');
    if (pick === 'Set path') await vscode.commands.executeCommand('workbench.action.openSettings', 'tandem.path');
    if (pick === 'Show log') this.showLog();
  }

  /** "tandem: Show log": the log, with a pointer to `tandem doctor` last. */
  showLog(): void {
    this.output.info(doctorHint(this.binary));
    this.output.show();
  }

  private setStatus(state: 'stopped' | 'starting' | 'running' | 'error', detail?: string): void {
    const model = this.modelName ?? userSet(this.config().inspect<string>('model.name'));
    const mode = this.mode ?? userSet(this.config().inspect<string>('approvalMode')) ?? 'review';
    switch (state) {
      case 'stopped':
        this.status.text = '$(hubot) tandem';
        this.status.tooltip = 'tandem is not running. Click to open the chat.';
        break;
      case 'starting':
        this.status.text = '$(loading~spin) tandem';
        this.status.tooltip = 'tandem is starting';
        break;
      case 'running':
        this.status.text = `$(hubot) tandem: ${mode}${model ? ` · ${model}` : ''}`;
        this.status.tooltip = `tandem ${this.client?.initializeResult?.serverInfo?.version ?? ''} — mode ${mode}. Click to open the chat.`;
        break;
      case 'error':
        this.status.text = '$(error) tandem';
        this.status.tooltip = `${detail ?? 'tandem failed'}. Click to open the chat; "tandem: Restart" retries.`;
        break;
    }
  }
}
