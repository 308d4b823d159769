/**
 * The chat webview view: a locked-down webview (CSP `default-src 'none'`,
 * a nonce per render, resources only from the extension's `media/` and
 * `dist/`), fed a snapshot of the transcript when it (re)loads and the
 * transcript events after that, batched per 16 ms. Rendering and
 * per-frame coalescing happen in the webview's script (`webview/chat.ts`).
 */
import * as crypto from 'crypto';
import * as vscode from 'vscode';
import type { FromWebview, ToWebview } from './messages';
import type { Transcript, TranscriptEvent } from './transcript';

export class ChatView implements vscode.WebviewViewProvider, vscode.Disposable {
  static readonly viewType = 'tandem.chat';
  private view: vscode.WebviewView | undefined;
  private queue: TranscriptEvent[] = [];
  private timer: NodeJS.Timeout | undefined;
  private ready = false;
  private readonly disposables: vscode.Disposable[] = [];

  constructor(
    private readonly extensionUri: vscode.Uri,
    private readonly snapshot: () => { transcript: Transcript; model?: string; roots?: string[] },
    private readonly onMessage: (m: FromWebview) => void,
  ) {}

  dispose(): void {
    if (this.timer) clearTimeout(this.timer);
    for (const d of this.disposables) d.dispose();
  }

  get visible(): boolean {
    return this.view?.visible === true;
  }

  resolveWebviewView(view: vscode.WebviewView): void {
    this.view = view;
    this.ready = false;
    const media = vscode.Uri.joinPath(this.extensionUri, 'media');
    const dist = vscode.Uri.joinPath(this.extensionUri, 'dist');
    view.webview.options = { enableScripts: true, localResourceRoots: [media, dist] };
    view.webview.html = this.html(view.webview, media, dist);
    this.disposables.push(
      view.webview.onDidReceiveMessage((m: FromWebview) => {
        if (m.type === 'ready') {
          this.ready = true;
          this.queue = [];
          this.post({ type: 'snapshot', ...this.snapshot() });
        }
        this.onMessage(m);
      }),
      view.onDidDispose(() => {
        this.view = undefined;
        this.ready = false;
      }),
    );
  }

  /** Queues events for the webview; they go out together within 16 ms. */
  push(events: TranscriptEvent[]): void {
    if (!this.view || !this.ready) return;
    this.queue.push(...events);
    this.timer ??= setTimeout(() => this.flush(), 16);
  }

  /** Sends the whole transcript again (after a session switch). */
  resync(): void {
    this.queue = [];
    if (this.view && this.ready) this.post({ type: 'snapshot', ...this.snapshot() });
  }

  focusPrompt(): void {
    this.post({ type: 'focusPrompt' });
  }

  private flush(): void {
    this.timer = undefined;
    if (this.queue.length === 0) return;
    const events = this.queue;
    this.queue = [];
    this.post({ type: 'events', events });
  }

  private post(m: ToWebview): void {
    void this.view?.webview.postMessage(m);
  }

  private html(webview: vscode.Webview, media: vscode.Uri, dist: vscode.Uri): string {
    const nonce = crypto.randomBytes(16).toString('base64');
    const css = webview.asWebviewUri(vscode.Uri.joinPath(media, 'chat.css'));
    const script = webview.asWebviewUri(vscode.Uri.joinPath(dist, 'chat.js'));
    const csp = [
      "default-src 'none'",
      `style-src ${webview.cspSource}`,
      `img-src ${webview.cspSource} data:`,
      `font-src ${webview.cspSource}`,
      `script-src 'nonce-${nonce}'`,
    ].join('; ');
    return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="${csp}">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<link href="${css}" rel="stylesheet">
<title>tandem</title>
</head>
<body>
<div id="app"></div>
<script nonce="${nonce}" src="${script}"></script>
</body>
</html>`;
  }
}
