/**
 * "Follow the agent": with `tandem.followAgent` on, each live tool-call
 * update that names `locations` (a file read, grep's first hit, a file a
 * patch changes) reveals the first file location in an editor, at its line,
 * without taking focus. Replays (loading a session) are not followed, and
 * directories (list_files) are skipped.
 */
import * as vscode from 'vscode';
import type * as ext from './lsp_ext';

export const FOLLOW_SETTING = 'followAgent';

export function following(): boolean {
  return vscode.workspace.getConfiguration('tandem').get<boolean>(FOLLOW_SETTING, false);
}

/** Flips the setting (user scope); says so in the status bar. */
export async function toggleFollow(): Promise<void> {
  const on = !following();
  await vscode.workspace.getConfiguration('tandem').update(FOLLOW_SETTING, on, true);
  vscode.window.setStatusBarMessage(`tandem: following the agent ${on ? 'on' : 'off'}`, 3000);
}

/** Reveals the first file location of `p`, if it has one and following is on. */
export async function follow(p: ext.UpdateParams): Promise<void> {
  const u = p.update;
  if (u.sessionUpdate !== 'tool_call_update' || !u.locations?.length || !following()) return;
  for (const loc of u.locations) {
    const uri = vscode.Uri.file(loc.path);
    try {
      // FileType.Directory is 2 (a bit: a symlink to a directory is 66).
      if ((await vscode.workspace.fs.stat(uri)).type & 2) continue;
    } catch {
      continue;
    }
    const line = Math.max(0, (loc.line ?? 1) - 1);
    const doc = await vscode.workspace.openTextDocument(uri);
    const range = doc.lineAt(Math.min(line, doc.lineCount - 1)).range;
    await vscode.window.showTextDocument(doc, { preview: true, preserveFocus: true, selection: range.with(range.start, range.start) });
    return;
  }
}
