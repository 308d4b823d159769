//! What the wire fuzz throws (`fuzz.rs` runs it): the wire surface of
//! each frontend as valid templates, messages built from them with
//! mutated params and odd ids, messages about the open document near its
//! text, responses to made-up requests of the daemon's, and each case's
//! framing — good, broken, cut short, oversized, split or with junk for
//! LSP; whole, bad, blank, split or doubled lines for ACP.

use serde_json::{json, Value};

use super::gen::{self, Gen};

/// What the cases aim at: a live session and an open document.
pub(super) struct Surface {
    pub(super) session: String,
    pub(super) root: String,
    pub(super) file: String,
}

/// Every method of the LSP frontend's wire surface (protocol.md) but
/// `shutdown` and `exit`, which end the conversation by design: (method,
/// is a request, valid params).
pub(super) fn lsp_methods(s: &Surface) -> Vec<(&'static str, bool, Value)> {
    let range = json!({"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 4}});
    let doc = json!({"uri": s.file, "version": 1});
    let prompt =
        json!([{"type": "text", "text": "hello"}, {"type": "resource_link", "uri": s.file}]);
    vec![
        (
            "initialize",
            true,
            json!({"processId": null, "rootUri": s.root, "capabilities": {}}),
        ),
        ("initialized", false, json!({})),
        (
            "tandem/newSession",
            true,
            json!({"workspaceFolder": s.root, "title": "fuzz",
            "config": {"approval": {"mode": "read-only"}, "limits": {"idle_timeout_secs": 5}}}),
        ),
        (
            "tandem/prompt",
            true,
            json!({"sessionId": s.session, "prompt": prompt}),
        ),
        (
            "tandem/steer",
            true,
            json!({"sessionId": s.session, "prompt": prompt, "wake": false}),
        ),
        (
            "tandem/setMode",
            true,
            json!({"sessionId": s.session, "mode": "review"}),
        ),
        (
            "tandem/cancel",
            false,
            json!({"sessionId": s.session, "keepInbox": true}),
        ),
        (
            "tandem/listSessions",
            true,
            json!({"workspaceFolder": s.root}),
        ),
        ("tandem/loadSession", true, json!({"sessionId": s.session})),
        (
            "tandem/runTask",
            true,
            json!({"task": "explain", "textDocument": doc, "range": range,
            "instruction": "why", "diagnostics": []}),
        ),
        (
            "tandem/attachSession",
            true,
            json!({"sessionId": s.session}),
        ),
        (
            "textDocument/didOpen",
            false,
            json!({"textDocument": {"uri": s.file, "languageId": "rust",
            "version": 2, "text": "fn main() {}\n"}}),
        ),
        (
            "textDocument/didChange",
            false,
            json!({"textDocument": {"uri": s.file, "version": 3},
            "contentChanges": [{"range": range, "text": "fn é"}]}),
        ),
        (
            "textDocument/didSave",
            false,
            json!({"textDocument": {"uri": s.file}, "text": "x"}),
        ),
        (
            "textDocument/didClose",
            false,
            json!({"textDocument": {"uri": s.file}}),
        ),
        (
            "workspace/didChangeWorkspaceFolders",
            false,
            json!({"event": {
            "added": [{"uri": s.root, "name": "root"}], "removed": []}}),
        ),
        (
            "textDocument/codeAction",
            true,
            json!({"textDocument": {"uri": s.file}, "range": range,
            "context": {"diagnostics": []}}),
        ),
        (
            "workspace/executeCommand",
            true,
            json!({"command": "tandem.runTask", "arguments": [
            {"task": "explain", "uri": s.file, "range": range, "version": 1, "diagnostics": []}]}),
        ),
        ("$/cancelRequest", false, json!({"id": 3})),
        (
            "window/workDoneProgress/cancel",
            false,
            json!({"token": "tandem-progress-1"}),
        ),
        ("$/setTrace", false, json!({"value": "verbose"})),
        (
            "textDocument/hover",
            true,
            json!({"textDocument": {"uri": s.file}, "position": {"line": 0, "character": 0}}),
        ),
        ("tandem/doesNotExist", true, json!({})),
    ]
}

/// The ACP frontend's agent methods (protocol.md, "ACP mode").
pub(super) fn acp_methods(s: &Surface) -> Vec<(&'static str, bool, Value)> {
    let cwd = s.root.trim_start_matches("file://").to_string();
    let prompt = json!([{"type": "text", "text": "hello"}]);
    vec![
        (
            "initialize",
            true,
            json!({"protocolVersion": 1, "clientCapabilities": {}}),
        ),
        ("authenticate", true, json!({"methodId": "none"})),
        ("session/new", true, json!({"cwd": cwd, "mcpServers": []})),
        (
            "session/load",
            true,
            json!({"sessionId": s.session, "cwd": cwd, "mcpServers": []}),
        ),
        (
            "session/resume",
            true,
            json!({"sessionId": s.session, "cwd": cwd, "mcpServers": []}),
        ),
        ("session/list", true, json!({"cwd": cwd, "cursor": "20"})),
        (
            "session/prompt",
            true,
            json!({"sessionId": s.session, "prompt": prompt}),
        ),
        (
            "session/prompt",
            true,
            json!({"sessionId": s.session, "prompt": [
            {"type": "text", "text": "/explain this"},
            {"type": "resource_link", "uri": format!("{}#L1-2", s.file), "name": "notes.txt"}]}),
        ),
        (
            "session/set_mode",
            true,
            json!({"sessionId": s.session, "modeId": "auto"}),
        ),
        (
            "session/set_config_option",
            true,
            json!({"sessionId": s.session, "configId": "mode", "value": "review"}),
        ),
        ("session/cancel", false, json!({"sessionId": s.session})),
        ("$/cancel_request", false, json!({"requestId": 4})),
        ("session/doesNotExist", true, json!({})),
    ]
}

/// One well-formed message to a random method with mutated params, as
/// text; requests get an id, sometimes an odd one.
fn fuzzed_message(g: &mut Gen, methods: &[(&'static str, bool, Value)], id: i64) -> String {
    let (method, is_request, template) = g.pick(methods).clone();
    let params = match g.below(10) {
        0 => None,
        _ => Some(gen::to_text(&g.mutate(&template))),
    };
    let id = (is_request || g.chance(5)).then(|| g.odd_id(id));
    gen::message(id.as_deref(), method, params.as_deref())
}

/// A message about the open document with positions near its text (where
/// UTF-16 columns, line ends and multi-byte characters meet): an edit, a
/// reopen, a code action or a task.
fn near_the_text(g: &mut Gen, file: &str, id: i64) -> String {
    const TEXTS: &[&str] = &[
        "",
        "x",
        "\n",
        "\r\n",
        "é",
        "🦀",
        "日本\n語",
        "\u{200d}",
        "a\rb",
        "\t\t",
        "fn f() {}\n",
    ];
    let position = |g: &mut Gen| json!({"line": g.below(6), "character": g.below(14)});
    let range = json!({"start": position(g), "end": position(g)});
    let text: String = (0..g.below(4)).map(|_| *g.pick(TEXTS)).collect();
    let version = g.below(50) as i64 - 2;
    let (method, params) = match g.below(8) {
        0 => (
            "textDocument/didOpen",
            json!({"textDocument": {"uri": file, "languageId": "rust", "version": version, "text": text}}),
        ),
        1 => (
            "textDocument/codeAction",
            json!({"textDocument": {"uri": file}, "range": range, "context": {"diagnostics": [
                {"range": range, "message": text, "severity": 1}]}}),
        ),
        2 => (
            "tandem/runTask",
            json!({"task": *g.pick(&["explain", "fix", "edit", "tests", "document"]),
                   "textDocument": {"uri": file, "version": version}, "range": range, "instruction": text}),
        ),
        3 => (
            "textDocument/didChange",
            json!({"textDocument": {"uri": file, "version": version}, "contentChanges": [{"text": text}]}),
        ),
        _ => (
            "textDocument/didChange",
            json!({"textDocument": {"uri": file, "version": version},
                   "contentChanges": [{"range": range, "text": text}, {"range": range, "text": text}]}),
        ),
    };
    let is_request = !method.starts_with("textDocument/did");
    let id = is_request.then(|| id.to_string());
    gen::message(id.as_deref(), method, Some(&params.to_string()))
}

/// A response to a request of the daemon's, real or made up.
fn fuzzed_response(g: &mut Gen) -> String {
    let id = format!("\"tandem-{}\"", g.below(40));
    let body = if g.chance(50) {
        format!(",\"result\":{}", gen::to_text(&g.value(2)))
    } else {
        format!(",\"error\":{{\"code\":{},\"message\":\"no\"}}", g.number())
    };
    format!("{{\"jsonrpc\":\"2.0\",\"id\":{id}{body}}}")
}

/// One case: the bytes to write (maybe in several writes), and the
/// message when it reaches the daemon whole (so a request in it must be
/// answered).
pub(super) struct Case {
    pub(super) writes: Vec<Vec<u8>>,
    pub(super) intact: Option<String>,
}

/// One LSP case. `debt` is how many bytes the reader still takes as the
/// body of a frame we cut short; while it is owed, only well-formed frames
/// are sent (they pay it, and the reader resynchronizes after the one that
/// is cut).
pub(super) fn lsp_case(
    g: &mut Gen,
    methods: &[(&'static str, bool, Value)],
    file: &str,
    id: i64,
    debt: &mut usize,
) -> Case {
    let message = if g.chance(15) {
        near_the_text(g, file, id)
    } else {
        fuzzed_message(g, methods, id)
    };
    let good = |g: &mut Gen, body: &[u8]| {
        let mut bytes = gen::lsp_header(g, body.len());
        bytes.extend_from_slice(body);
        bytes
    };
    if *debt > 0 {
        let bytes = good(g, message.as_bytes());
        *debt = debt.saturating_sub(bytes.len());
        return Case {
            writes: vec![bytes],
            intact: None,
        };
    }
    let body = message.clone().into_bytes();
    let whole = Some(message);
    let bytes = match g.below(100) {
        0..=54 => {
            return Case {
                writes: vec![good(g, &body)],
                intact: whole,
            }
        }
        55..=59 => {
            let response = fuzzed_response(g);
            good(g, response.as_bytes())
        }
        60..=69 => {
            let bad = gen::bad_body(g, std::str::from_utf8(&body).unwrap_or("{}"));
            good(g, &bad)
        }
        70..=79 => gen::bad_header(g, &body),
        80..=84 => {
            // Truncated: the header promises the whole body, a part comes.
            let short = g.below(body.len().min(4096)) + 1;
            let mut bytes = gen::lsp_header(g, body.len());
            bytes.extend_from_slice(&body[..body.len() - short]);
            *debt = short;
            bytes
        }
        85..=89 => {
            // Oversized: more body than the header says.
            let extra = g.below(body.len().max(2) - 1) + 1;
            let mut bytes = gen::lsp_header(g, body.len().saturating_sub(extra));
            bytes.extend_from_slice(&body);
            bytes
        }
        90..=94 => {
            // Junk before a frame: the reader may take the frame's header
            // as part of the junk's bad header block and skip its body.
            let n = g.below(200) + 1;
            let mut bytes = g.bytes(n);
            bytes.extend(good(g, &body));
            bytes
        }
        _ => {
            // A good frame written in pieces.
            let bytes = good(g, &body);
            let mut pieces = Vec::new();
            let mut rest = bytes.as_slice();
            while !rest.is_empty() {
                let n = (g.below(rest.len()) + 1).min(rest.len());
                pieces.push(rest[..n].to_vec());
                rest = &rest[n..];
            }
            return Case {
                writes: pieces,
                intact: whole,
            };
        }
    };
    Case {
        writes: vec![bytes],
        intact: None,
    }
}

/// One ACP case: lines to write, each write ending in a newline except
/// where a line is split across writes.
pub(super) fn acp_case(g: &mut Gen, methods: &[(&'static str, bool, Value)], id: i64) -> Case {
    let message = fuzzed_message(g, methods, id);
    let line = |bytes: &[u8]| {
        let mut line: Vec<u8> = bytes
            .iter()
            .map(|&b| if b == b'\n' { b' ' } else { b })
            .collect();
        line.push(b'\n');
        line
    };
    let broken = |writes| Case {
        writes,
        intact: None,
    };
    match g.below(100) {
        0..=59 => Case {
            writes: vec![line(message.as_bytes())],
            intact: Some(message),
        },
        60..=64 => broken(vec![line(fuzzed_response(g).as_bytes())]),
        65..=79 => broken(vec![line(&gen::bad_body(g, &message))]),
        80..=84 => broken(vec![g
            .pick(&["\n", "   \n", "\r\n", "\t\n"])
            .as_bytes()
            .to_vec()]),
        85..=89 => {
            let bytes = line(message.as_bytes());
            let cut = g.below(bytes.len() - 1) + 1;
            Case {
                writes: vec![bytes[..cut].to_vec(), bytes[cut..].to_vec()],
                intact: Some(message),
            }
        }
        90..=94 => broken(vec![line(format!("{message}{message}").as_bytes())]),
        _ => {
            let mut bytes = message.clone().into_bytes();
            bytes.extend_from_slice(b"\r\n");
            Case {
                writes: vec![bytes],
                intact: Some(message),
            }
        }
    }
}
