/**
 * The user's language servers as the agent's eyes: answers the daemon's
 * `tandem/diagnostics` (`vscode.languages.getDiagnostics`),
 * `tandem/definition` / `tandem/references` / `tandem/workspaceSymbols`
 * (the `vscode.execute*Provider` commands, so every installed language
 * extension answers), and reports `onDidChangeDiagnostics` of open
 * documents as `tandem/diagnosticsChanged` with the document's version.
 *
 * Positions are UTF-16 on both sides (the language client offers only
 * that). A file that is not open is opened invisibly (`openTextDocument`,
 * no editor); VS Code has no API to close a document, it drops one no
 * editor shows by itself. A request nothing answers gets an empty result
 * with a reason, never an error.
 */
import * as vscode from 'vscode';
import type {
  DiagnosticsResult, FileDiagnostics, LocationsResult, LspDiagnostic, LspLocation, LspRange,
  SymbolAtParams, WorkspaceSymbolsResult,
} from './lsp_ext';

/** How long a file tandem opened may take to get its first diagnostics. */
const FIRST_DIAGNOSTICS_MS = 5000;

/** Pure: a VS Code range as an LSP range. */
export function lspRange(r: vscode.Range): LspRange {
  return { start: { line: r.start.line, character: r.start.character }, end: { line: r.end.line, character: r.end.character } };
}

/** Pure: a VS Code diagnostic as an LSP diagnostic (VS Code counts severities from 0). */
export function lspDiagnostic(d: vscode.Diagnostic): LspDiagnostic {
  const code = typeof d.code === 'object' && d.code !== null ? d.code.value : d.code;
  return {
    range: lspRange(d.range),
    severity: d.severity + 1,
    message: d.message,
    ...(d.source ? { source: d.source } : {}),
    ...(code !== undefined ? { code } : {}),
  };
}

/** Pure: a `Location` or `LocationLink` as an LSP location. */
export function lspLocation(l: vscode.Location | vscode.LocationLink): LspLocation {
  if ('targetUri' in l) return { uri: l.targetUri.toString(), range: lspRange(l.targetSelectionRange ?? l.targetRange) };
  return { uri: l.uri.toString(), range: lspRange(l.range) };
}

function openDocument(uri: vscode.Uri): vscode.TextDocument | undefined {
  return vscode.workspace.textDocuments.find((d) => d.uri.toString() === uri.toString());
}

function fileDiagnostics(uri: vscode.Uri): FileDiagnostics {
  return {
    uri: uri.toString(),
    version: openDocument(uri)?.version ?? null,
    diagnostics: vscode.languages.getDiagnostics(uri).map(lspDiagnostic),
  };
}

/** Opens `uri` without showing it, so its language server sees it. */
async function ensureOpen(uri: vscode.Uri): Promise<boolean> {
  if (openDocument(uri)) return false;
  await vscode.workspace.openTextDocument(uri);
  return true;
}

/** Resolves when `uri` gets diagnostics, or after `ms`. */
function firstDiagnostics(uri: vscode.Uri, ms: number): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    const sub = vscode.languages.onDidChangeDiagnostics((e) => {
      if (e.uris.some((u) => u.toString() === uri.toString())) done();
    });
    function done(): void {
      clearTimeout(timer);
      sub.dispose();
      resolve();
    }
  });
}

function reasonOf(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

export class LanguageFeatures implements vscode.Disposable {
  private readonly subscription: vscode.Disposable;

  constructor(private readonly notify: (params: FileDiagnostics) => void) {
    this.subscription = vscode.languages.onDidChangeDiagnostics((e) => {
      for (const uri of e.uris) this.report(uri);
    });
  }

  dispose(): void {
    this.subscription.dispose();
  }

  /** Tells the daemon an open file's diagnostics. */
  private report(uri: vscode.Uri): void {
    if (uri.scheme === 'file' && openDocument(uri)) this.notify(fileDiagnostics(uri));
  }

  /** Tells the daemon every open file's diagnostics (after it starts). */
  reportAll(): void {
    for (const [uri] of vscode.languages.getDiagnostics()) this.report(uri);
  }

  async diagnostics(params: { uris?: string[] }): Promise<DiagnosticsResult> {
    if (!params.uris) {
      const files = vscode.languages.getDiagnostics()
        .filter(([uri, list]) => uri.scheme === 'file' && list.length > 0)
        .map(([uri]) => fileDiagnostics(uri));
      return { files };
    }
    const files: FileDiagnostics[] = [];
    const problems: string[] = [];
    for (const raw of params.uris) {
      const uri = vscode.Uri.parse(raw);
      try {
        if (await ensureOpen(uri)) await firstDiagnostics(uri, FIRST_DIAGNOSTICS_MS);
      } catch (e) {
        problems.push(`${uri.fsPath}: ${reasonOf(e)}`);
      }
      files.push(fileDiagnostics(uri));
    }
    return problems.length > 0 ? { files, reason: problems.join('; ') } : { files };
  }

  private async locations(command: string, what: string, params: SymbolAtParams): Promise<LocationsResult> {
    const uri = vscode.Uri.parse(params.uri);
    try {
      await ensureOpen(uri);
      const position = new vscode.Position(params.position.line, params.position.character);
      const found = await vscode.commands.executeCommand<(vscode.Location | vscode.LocationLink)[] | undefined>(command, uri, position);
      let locations = (found ?? []).map(lspLocation);
      if (what === 'references' && params.includeDeclaration === false) {
        // VS Code's command always includes the declaration: drop where it is defined.
        const defined = await vscode.commands.executeCommand<(vscode.Location | vscode.LocationLink)[] | undefined>(
          'vscode.executeDefinitionProvider', uri, position,
        );
        const at = new Set((defined ?? []).map((l) => JSON.stringify(lspLocation(l))));
        locations = locations.filter((l) => !at.has(JSON.stringify(l)));
      }
      if (locations.length === 0) {
        const language = openDocument(uri)?.languageId ?? 'this file';
        return { locations, reason: `no ${what} provider for ${language} found anything there` };
      }
      return { locations };
    } catch (e) {
      return { locations: [], reason: reasonOf(e) };
    }
  }

  definition(params: SymbolAtParams): Promise<LocationsResult> {
    return this.locations('vscode.executeDefinitionProvider', 'definition', params);
  }

  references(params: SymbolAtParams): Promise<LocationsResult> {
    return this.locations('vscode.executeReferenceProvider', 'references', params);
  }

  async workspaceSymbols(params: { query: string }): Promise<WorkspaceSymbolsResult> {
    try {
      const found = await vscode.commands.executeCommand<vscode.SymbolInformation[] | undefined>(
        'vscode.executeWorkspaceSymbolProvider', params.query,
      );
      const symbols = (found ?? []).map((s) => ({
        name: s.name,
        // VS Code counts symbol kinds from 0, LSP from 1.
        kind: s.kind + 1,
        ...(s.containerName ? { containerName: s.containerName } : {}),
        location: lspLocation(s.location),
      }));
      return symbols.length > 0 ? { symbols } : { symbols, reason: 'no workspace symbol provider found anything' };
    } catch (e) {
      return { symbols: [], reason: reasonOf(e) };
    }
  }
}
