/**
 * Builds the `LanguageClient` for `tandem lsp`: the server options (binary,
 * environment), the client options (documents to sync, initializationOptions,
 * the output channel) and the one feature tandem needs beyond the library's:
 * it declares `capabilities.experimental.tandem` and keeps the library from
 * registering `tandem.runTask` itself (the extension contributes that
 * command, so the lightbulb's actions and the keybinding reach one handler).
 * It registers no commands.
 */
import * as vscode from 'vscode';
import {
  LanguageClient, LanguageClientOptions, ServerOptions, StaticFeature,
  ClientCapabilities, ServerCapabilities, FeatureState, Middleware,
} from 'vscode-languageclient/node';
import { RUN_TASK_COMMAND, TANDEM_EXPERIMENTAL_CAPABILITIES } from './lsp_ext';

class TandemFeature implements StaticFeature {
  getState(): FeatureState {
    return { kind: 'static' };
  }
  fillClientCapabilities(capabilities: ClientCapabilities): void {
    capabilities.experimental = {
      ...(capabilities.experimental as object | undefined),
      tandem: { ...TANDEM_EXPERIMENTAL_CAPABILITIES },
    };
  }
  initialize(capabilities: ServerCapabilities): void {
    const provider = capabilities.executeCommandProvider;
    if (provider?.commands) {
      provider.commands = provider.commands.filter((c) => c !== RUN_TASK_COMMAND);
    }
  }
  clear(): void {}
}

class TandemLanguageClient extends LanguageClient {
  protected registerBuiltinFeatures(): void {
    // First, so that its `initialize` runs before the command feature's.
    this.registerFeature(new TandemFeature());
    super.registerBuiltinFeatures();
  }
}

export interface ClientSetup {
  binary: string;
  env: NodeJS.ProcessEnv;
  initializationOptions: Record<string, unknown>;
  outputChannel: vscode.LogOutputChannel;
  middleware: Middleware;
}

export function createClient(setup: ClientSetup): LanguageClient {
  const run = {
    command: setup.binary,
    // No `transport`: spawned as a plain executable (`tandem lsp` would also
    // accept the `--stdio` the library appends for TransportKind.stdio).
    args: ['lsp'],
    options: { env: setup.env },
  };
  const serverOptions: ServerOptions = { run, debug: run };
  const clientOptions: LanguageClientOptions = {
    // Every file the user opens is mirrored, so the agent reads unsaved text.
    documentSelector: [{ scheme: 'file' }, { scheme: 'untitled' }],
    initializationOptions: setup.initializationOptions,
    outputChannel: setup.outputChannel,
    // The daemon's log is shown, never popped up over the user's work.
    revealOutputChannelOn: 4 /* RevealOutputChannelOn.Never */,
    middleware: setup.middleware,
    connectionOptions: { maxRestartCount: 0 },
  };
  return new TandemLanguageClient('tandem', 'tandem', serverOptions, clientOptions);
}
