/**
 * Where the `tandem` binary is: the `tandem.path` setting, else `tandem` on
 * PATH, else `target/release/tandem` (then `target/debug/tandem`) of an open
 * workspace folder that is this repository. Pure, with the file system passed
 * in, so it is unit-tested without VS Code.
 */
import * as path from 'path';

export interface BinaryProbe {
  isExecutable(file: string): boolean;
  pathDirs: string[];
  workspaceFolders: string[];
  isTandemRepo(folder: string): boolean;
}

export type Resolution = { ok: true; path: string; from: 'setting' | 'PATH' | 'workspace' } | { ok: false; tried: string[] };

export function resolveBinary(setting: string | undefined, probe: BinaryProbe): Resolution {
  const tried: string[] = [];
  if (setting && setting.trim() !== '') {
    const p = setting.trim();
    if (probe.isExecutable(p)) return { ok: true, path: p, from: 'setting' };
    tried.push(`${p} (tandem.path)`);
    return { ok: false, tried };
  }
  for (const dir of probe.pathDirs) {
    if (!dir) continue;
    const p = path.join(dir, 'tandem');
    if (probe.isExecutable(p)) return { ok: true, path: p, from: 'PATH' };
  }
  tried.push('tandem on PATH');
  for (const folder of probe.workspaceFolders) {
    if (!probe.isTandemRepo(folder)) continue;
    for (const profile of ['release', 'debug']) {
      const p = path.join(folder, 'target', profile, 'tandem');
      if (probe.isExecutable(p)) return { ok: true, path: p, from: 'workspace' };
      tried.push(p);
    }
  }
  return { ok: false, tried };
}

/** The protocol version this extension speaks; older daemons are refused. */
export const MIN_PROTOCOL_VERSION = 1;

/** Reads `capabilities.experimental.tandem.protocolVersion` from an initialize result. */
export function protocolVersionOf(capabilities: unknown): number | undefined {
  const v = (capabilities as { experimental?: { tandem?: { protocolVersion?: unknown } } } | undefined)
    ?.experimental?.tandem?.protocolVersion;
  return typeof v === 'number' ? v : undefined;
}

/**
 * The warning to show once when the daemon has no exec sandbox
 * (`capabilities.experimental.tandem.sandbox.available === false`), or
 * undefined when it has one (or is too old to say).
 */
export function sandboxWarningOf(capabilities: unknown): string | undefined {
  const sandbox = (capabilities as { experimental?: { tandem?: { sandbox?: { available?: unknown; reason?: unknown } } } } | undefined)
    ?.experimental?.tandem?.sandbox;
  if (sandbox?.available !== false) return undefined;
  const reason = typeof sandbox.reason === 'string' ? sandbox.reason : 'exec sandbox unavailable';
  return `tandem: ${reason}`;
}

/**
 * The line "tandem: Show log" adds before it shows the log: `tandem doctor`
 * checks the model server, the sandbox, the config files and more, with a
 * fix for each problem. `binary` is the resolved daemon, when known.
 */
export function doctorHint(binary: string | undefined): string {
  const program = binary === undefined ? 'tandem' : /\s/.test(binary) ? `"${binary}"` : binary;
  return `tandem: to check the model server, the exec sandbox, the config files and TANDEM_HOME, run \`${program} doctor\` in a terminal (a fix is printed for each problem)`;
}
