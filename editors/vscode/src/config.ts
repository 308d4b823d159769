/**
 * Typed getters over the `tandem.*` settings, and the pure mapping from the
 * settings the user has set to the daemon's `initializationOptions`. A
 * setting left at its default is not sent, so the daemon's own configuration
 * (`config.toml`, `TANDEM_*` environment) stays in force.
 */
import type { ApprovalMode } from './lsp_ext';

/** One setting as `WorkspaceConfiguration.inspect` reports it. */
export interface Inspected<T> {
  globalValue?: T;
  workspaceValue?: T;
  workspaceFolderValue?: T;
}

/** The value the user set (folder over workspace over user), or undefined. */
export function userSet<T>(i: Inspected<T> | undefined): T | undefined {
  if (!i) return undefined;
  return i.workspaceFolderValue ?? i.workspaceValue ?? i.globalValue;
}

/** Setting (under `tandem.`) -> path in `initializationOptions` (config.toml keys). */
export const INIT_OPTION_SETTINGS: ReadonlyArray<[string, string[]]> = [
  ['model.provider', ['model', 'provider']],
  ['model.baseUrl', ['model', 'base_url']],
  ['model.name', ['model', 'name']],
  ['model.apiKeyEnv', ['model', 'api_key_env']],
  ['model.contextWindow', ['model', 'context_window']],
  ['approvalMode', ['approval', 'mode']],
  ['tasks', ['tasks']],
];

/** Settings whose change needs the daemon restarted. */
export const RESTART_SETTINGS = ['path', 'logLevel', ...INIT_OPTION_SETTINGS.map(([s]) => s)];

/**
 * `initializationOptions` from the settings the user set. `inspect` is
 * `(key) => workspace.getConfiguration('tandem').inspect(key)`.
 */
export function initializationOptions(inspect: (key: string) => Inspected<unknown> | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [setting, path] of INIT_OPTION_SETTINGS) {
    const value = userSet(inspect(setting));
    if (value === undefined || value === null || value === '') continue;
    let node = out;
    for (const key of path.slice(0, -1)) {
      node = (node[key] ??= {}) as Record<string, unknown>;
    }
    node[path[path.length - 1]] = value;
  }
  return out;
}

/**
 * The environment of the daemon: the editor's, plus `TANDEM_LOG` from the
 * log level setting, plus the API key from SecretStorage under the variable
 * the daemon reads it from (never written to settings or logs).
 */
export function daemonEnv(
  base: NodeJS.ProcessEnv,
  opts: { logLevel?: string; apiKey?: string; apiKeyEnv?: string; provider?: string },
): NodeJS.ProcessEnv {
  const env = { ...base };
  if (opts.logLevel) env.TANDEM_LOG = opts.logLevel;
  if (opts.apiKey) {
    const name = opts.apiKeyEnv || (opts.provider === 'anthropic' ? 'ANTHROPIC_API_KEY' : 'OPENAI_API_KEY');
    env[name] = opts.apiKey;
  }
  return env;
}

export const SECRET_API_KEY = 'tandem.apiKey';
export type { ApprovalMode };
