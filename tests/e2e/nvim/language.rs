//! The user's language servers as the agent's eyes, in a real headless
//! Neovim with a real language server nobody here wrote: npm's pyright
//! (`pyright-langserver --stdio`, from tests/lsp-servers' lock file),
//! attached to a small Python project beside tandem.

use std::path::{Path, PathBuf};

use serde_json::json;

use super::harness::{config, lua_string, run, Workspace};
use crate::support::model_server::{openai, ModelServer};

/// pyright's language server, installed by scripts/test; missing, the
/// test fails under `CI=true` and is skipped (saying so) elsewhere.
fn pyright() -> Option<PathBuf> {
    let bin = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/lsp-servers/node_modules/.bin/pyright-langserver");
    if bin.exists() {
        return Some(bin);
    }
    let message = format!(
        "{} is not installed; scripts/test installs it (npm ci in tests/lsp-servers)",
        bin.display()
    );
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{message}");
    }
    eprintln!("SKIPPED: {message}");
    None
}

/// Starts pyright for Python buffers of the workspace, then the plugin.
fn with_pyright(bin: &Path, body: &str) -> String {
    format!(
        r#"
vim.lsp.config('pyright', {{
  cmd = {{ {bin}, '--stdio' }},
  filetypes = {{ 'python' }},
  root_dir = TEST.root,
  settings = {{ python = {{ analysis = {{ diagnosticMode = 'openFilesOnly' }} }} }},
}})
vim.lsp.enable('pyright')
T.setup()
local function pyright_on(buf)
  return #vim.lsp.get_clients({{ bufnr = buf, name = 'pyright' }}) > 0
end
{body}
"#,
        bin = lua_string(&bin.display().to_string())
    )
}

fn patch_call(patch: &str) -> crate::support::model_server::Reply {
    openai::tool_calls(&[(
        "call_patch",
        "apply_patch",
        &json!({ "input": patch }).to_string(),
    )])
}

/// With an error already there (`nam`), which is not news after the patch.
const APP: &str = "def greet(name):\n    return \"hello \" + nam\n\n\nprint(greet(\"world\"))\n";

#[tokio::test]
async fn a_patch_that_introduces_an_undefined_name_brings_pyrights_error_to_the_model() {
    if !super::harness::enabled() {
        return;
    }
    let Some(bin) = pyright() else { return };
    let server = ModelServer::start().await;
    server.push(patch_call(
        "*** Begin Patch\n*** Update File: app.py\n@@\n-print(greet(\"world\"))\n+print(greet(undefined_name))\n*** End Patch",
    ));
    server.push(openai::text(["done"]));
    let ws = Workspace::new();
    ws.write("pyrightconfig.json", "{}\n");
    ws.write("app.py", APP);
    let body = with_pyright(
        &bin,
        r#"
vim.cmd('edit ' .. T.path('app.py'))
local errors = { severity = vim.diagnostic.severity.ERROR }
T.wait(function() return #vim.diagnostic.get(0, errors) == 1 end, "pyright's first diagnostics", 60000)
vim.cmd('TandemPrompt make greet fail')
T.turn(1)
T.put('lines', T.lines(0))
"#,
    );
    // Generous for a loaded machine: the check ends when pyright has spoken.
    let mut config = config(&server, "auto");
    config["tools"] = json!({"diagnostics_settle_ms": 10000});
    let got = run(&ws, &config, &body).await;
    assert_eq!(
        got.lines("lines").last().map(String::as_str),
        Some("print(greet(undefined_name))")
    );
    let requests = server.wait_for_requests(2).await;
    let result = &requests[1].tool_messages()[0].1;
    assert!(
        result.starts_with("The patch was applied:\n- app.py: hunk 1 applied\n"),
        "{result}"
    );
    assert!(
        result.contains(
            "The editor reports 1 new error in the changed lines:\n\
             app.py:5:13: error: \"undefined_name\" is not defined"
        ),
        "{result}"
    );
    assert!(
        result.ends_with("     5\tprint(greet(undefined_name))"),
        "{result}"
    );
    // `nam` was wrong before the patch: not news.
    assert!(!result.contains("\"nam\""), "{result}");
}

#[tokio::test]
async fn definition_and_references_return_pyrights_locations_for_files_not_open() {
    if !super::harness::enabled() {
        return;
    }
    let Some(bin) = pyright() else { return };
    let server = ModelServer::start().await;
    server.push(openai::tool_calls(&[
        (
            "call_refs",
            "references",
            r#"{"path":"app.py","line":3,"symbol":"greet"}"#,
        ),
        (
            "call_def",
            "definition",
            r#"{"path":"app.py","line":3,"symbol":"greet"}"#,
        ),
        ("call_diag", "diagnostics", r#"{"paths":["lib.py"]}"#),
        (
            "call_txt",
            "definition",
            r#"{"path":"notes.txt","line":1,"symbol":"greet"}"#,
        ),
    ]));
    server.push(openai::text(["found"]));
    let ws = Workspace::new();
    ws.write("pyrightconfig.json", "{}\n");
    ws.write(
        "lib.py",
        "def greet(name):\n    return \"hi \" + name\n\nunknown_call()\n",
    );
    ws.write("notes.txt", "greet is in lib.py\n");
    ws.write("app.py", "from lib import greet\n\nprint(greet(\"x\"))\n");
    let body = with_pyright(
        &bin,
        r#"
-- pyright starts with the first Python buffer; none is open after.
vim.cmd('edit ' .. T.path('lib.py'))
T.wait(function() return pyright_on(0) end, 'pyright to attach', 60000)
vim.cmd('enew')
vim.cmd('bwipeout ' .. vim.fn.bufnr(T.path('lib.py')))
vim.cmd('TandemPrompt where is greet used?')
T.turn(1)
-- The buffers tandem loaded to ask are unloaded after the answers.
local function loaded(name) return vim.fn.bufloaded(T.path(name)) end
T.wait(function()
  return loaded('app.py') + loaded('lib.py') + loaded('notes.txt') == 0
end, 'the buffers tandem loaded to be unloaded', 5000)
"#,
    );
    run(&ws, &config(&server, "auto"), &body).await;
    let requests = server.wait_for_requests(2).await;
    let results = requests[1].tool_messages();
    let references = &results[0].1;
    assert!(
        references.starts_with("3 references of `greet` (app.py:3):"),
        "{references}"
    );
    for line in [
        "app.py:1:17: from lib import greet",
        "app.py:3:7: print(greet(\"x\"))",
        "lib.py:1:5: def greet(name):",
    ] {
        assert!(references.contains(line), "{line} not in {references}");
    }
    assert_eq!(
        results[1].1,
        "1 definition of `greet` (app.py:3):\nlib.py:1:5: def greet(name):"
    );
    assert_eq!(
        results[2].1,
        "1 error:\n\
         lib.py:4:1: error: \"unknown_call\" is not defined (Pyright reportUndefinedVariable)\n\
         \x20    4\tunknown_call()"
    );
    assert_eq!(
        results[3].1,
        "No definition found for `greet` (notes.txt:1) (the editor says: no language server \
         that answers textDocument/definition is attached to notes.txt)."
    );
}

/// Issue 27: `tandem/diagnosticsChanged` carries the version the server
/// published the diagnostics for, not the buffer's version when they
/// arrive (the daemon waits for the patched version's). The server is an
/// in-process one whose publishes the test times; without a version, the
/// buffer's is reported, as before.
#[tokio::test]
async fn diagnostics_changed_carries_the_version_the_server_published_for() {
    if !super::harness::enabled() {
        return;
    }
    let server = ModelServer::start().await;
    let ws = Workspace::new();
    ws.write("a.txt", "one\n");
    let body = r#"
T.setup()
vim.cmd('edit ' .. T.path('a.txt'))
local buf = vim.api.nvim_get_current_buf()
local client = require('tandem.client')
client.start()
client.attach(buf)
T.wait(function()
  local c = client.get()
  return c and client.ready() and vim.lsp.buf_is_attached(buf, c.id)
end, 'tandem to attach')
local sent = {}
local c = client.get()
local notify = c.notify
c.notify = function(self, method, params)
  if method == 'tandem/diagnosticsChanged' then
    table.insert(sent, params)
  end
  return notify(self, method, params)
end
local to_nvim
vim.lsp.start({
  name = 'stale-server',
  cmd = function(dispatchers)
    to_nvim = dispatchers
    return {
      request = function(method, _, callback)
        callback(nil, method == 'initialize' and { capabilities = { textDocumentSync = 1 } } or vim.NIL)
        return true, 1
      end,
      notify = function() return true end,
      is_closing = function() return false end,
      terminate = function() end,
    }
  end,
  root_dir = TEST.root,
}, { bufnr = buf })
T.wait(function() return #vim.lsp.get_clients({ bufnr = buf, name = 'stale-server' }) > 0 end, 'the server')
local opened = vim.lsp.util.buf_versions[buf]
vim.api.nvim_buf_set_lines(buf, 0, -1, false, { 'two' })
vim.api.nvim_buf_set_lines(buf, 0, -1, false, { 'three' })
local range = { start = { line = 0, character = 0 }, ['end'] = { line = 0, character = 3 } }
local function publish(version, message)
  to_nvim.notification('textDocument/publishDiagnostics', {
    uri = vim.uri_from_bufnr(buf), version = version,
    diagnostics = { { range = range, message = message, severity = 1 } },
  })
end
publish(opened, 'for the opened text')
T.wait(function() return #sent >= 1 end, 'the first report')
publish(nil, 'without a version')
T.wait(function() return #sent >= 2 end, 'the second report')
T.put('opened', opened)
T.put('now', vim.lsp.util.buf_versions[buf])
T.put('reported', { sent[1].version, sent[2].version })
T.put('messages', { sent[1].diagnostics[1].message, sent[2].diagnostics[1].message })
"#;
    let got = run(&ws, &config(&server, "auto"), body).await;
    let opened = got.get("opened").as_i64().unwrap();
    let now = got.get("now").as_i64().unwrap();
    assert!(now > opened, "the buffer moved on: {opened} → {now}");
    assert_eq!(got.get("reported"), &json!([opened, now]));
    assert_eq!(
        got.get("messages"),
        &json!(["for the opened text", "without a version"])
    );
}
