//! `:checkhealth tandem` and setup()'s validation.

use serde_json::json;

use super::harness::{config, run, Workspace};
use crate::support::client::tandem_bin;
use crate::support::model_server::ModelServer;

#[tokio::test]
async fn checkhealth_reports_neovim_the_binary_the_config_and_the_model_server() {
    if !super::harness::enabled() {
        return;
    }
    let server = ModelServer::start().await;
    let ws = Workspace::new();
    let got = run(
        &ws,
        &config(&server, "review"),
        r#"
T.setup()
vim.cmd('checkhealth tandem')
T.put('report', T.lines(0))
"#,
    )
    .await;
    let report = got.text("report");
    assert!(report.contains("OK Neovim 0."), "{report}");
    assert!(report.contains("OK setup() options are valid"), "{report}");
    assert!(
        report.contains(&format!("OK tandem {}", env!("CARGO_PKG_VERSION"))),
        "{report}"
    );
    assert!(
        report.contains(&format!(
            "OK model server reachable at {}",
            server.base_url()
        )),
        "{report}"
    );
    assert!(!report.contains("ERROR"), "{report}");
    // Points to `tandem doctor`, with the program the plugin starts.
    let doctor = format!("run `{} doctor` in a terminal", tandem_bin().display());
    assert!(report.contains(&doctor), "{report}");
}

#[tokio::test]
async fn bad_setup_options_are_refused_with_messages_naming_the_keys() {
    if !super::harness::enabled() {
        return;
    }
    let ws = Workspace::new();
    let got = run(
        &ws,
        &json!({}),
        r#"
local messages = {}
vim.notify = function(msg, level)
  table.insert(messages, { msg = msg, level = level })
end
local ok = require('tandem').setup({ cmd = 'tandem lsp', keymaps = { review_accept = 1 }, chat = { width = 'wide' }, modle = {} })
vim.wait(100, function() return #messages >= 2 end, 5)
T.put('ok', ok)
T.put('messages', vim.tbl_map(function(m) return m.msg end, messages))
T.put('command', vim.fn.exists(':TandemPrompt'))
local good = require('tandem').setup({ keymaps = { review_accept = false } })
T.put('good', good)
"#,
    )
    .await;
    assert_eq!(got.get("ok"), &json!(false));
    let messages = got.text("messages");
    assert!(
        messages.contains("`cmd` must be table, got string"),
        "{messages}"
    );
    assert!(
        messages.contains("`keymaps.review_accept` must be a string or false, got number"),
        "{messages}"
    );
    assert!(
        messages.contains("`chat.width` must be a number, got string"),
        "{messages}"
    );
    assert!(
        messages.contains("unknown setup() option(s) ignored: modle"),
        "{messages}"
    );
    assert_eq!(
        got.get("command"),
        &json!(0),
        "nothing is set up from bad options"
    );
    assert_eq!(got.get("good"), &json!(true));
}

#[tokio::test]
async fn the_help_has_a_tag_for_every_command_option_and_keymap() {
    if !super::harness::enabled() {
        return;
    }
    let ws = Workspace::new();
    let got = run(
        &ws,
        &json!({}),
        r#"
require('tandem').setup({})
-- Build the tags from a copy, as a plugin manager does, and look each up.
local doc = T.path('doc')
vim.fn.mkdir(doc, 'p')
vim.fn.writefile(vim.fn.readfile(TEST.plugin .. '/doc/tandem.txt'), doc .. '/tandem.txt')
vim.cmd('helptags ' .. vim.fn.fnameescape(doc))
local tags = {}
for _, line in ipairs(vim.fn.readfile(doc .. '/tags')) do
  tags[vim.split(line, '\t')[1]] = true
end
local missing = {}
for name in pairs(vim.api.nvim_get_commands({})) do
  if name:match('^Tandem') and not tags[':' .. name] then
    table.insert(missing, ':' .. name)
  end
end
local config = require('tandem.config')
for key in pairs(config.schema) do
  if not tags['tandem-option-' .. key] then
    table.insert(missing, 'tandem-option-' .. key)
  end
end
for key in pairs(config.schema.keymaps.default) do
  if not tags['tandem-keymap-' .. key] then
    table.insert(missing, 'tandem-keymap-' .. key)
  end
end
T.put('missing', missing)
T.put('commands', vim.tbl_count(vim.tbl_filter(function(n) return n:match('^Tandem') ~= nil end, vim.tbl_keys(vim.api.nvim_get_commands({})))))
"#,
    )
    .await;
    assert_eq!(got.get("missing"), &json!([]));
    assert_eq!(got.get("commands"), &json!(20));
}

#[tokio::test]
async fn a_missing_binary_is_a_clear_error_and_nothing_hangs() {
    if !super::harness::enabled() {
        return;
    }
    let ws = Workspace::new();
    let got = run(
        &ws,
        &json!({}),
        r#"
local messages = {}
vim.notify = function(msg) table.insert(messages, msg) end
require('tandem').setup({ cmd = { '/nonexistent/tandem', 'lsp' } })
vim.cmd('TandemPrompt hello')
T.wait(function() return #messages > 0 end, 'an error message')
T.put('messages', messages)
vim.cmd('checkhealth tandem')
T.put('health', T.lines(0))
"#,
    )
    .await;
    let messages = got.text("messages");
    assert!(messages.contains("/nonexistent/tandem"), "{messages}");
    let health = got.text("health");
    assert!(
        health.contains("ERROR `/nonexistent/tandem` is not executable"),
        "{health}"
    );
}

#[tokio::test]
async fn keymaps_can_be_changed_or_turned_off_in_setup() {
    if !super::harness::enabled() {
        return;
    }
    let ws = Workspace::new();
    let got = run(
        &ws,
        &json!({}),
        r#"
require('tandem').setup({ keymaps = { review_accept = '<leader>y', task_explain = false } })
require('tandem.review.keymaps').attach(0)
local function desc(lhs, mode)
  return vim.fn.maparg(lhs, mode, false, true).desc or ''
end
T.put('maps', {
  desc('<leader>y', 'n'), desc('<leader>ta', 'n'), desc('<leader>tr', 'n'),
  desc('<leader>ax', 'x'), desc('<leader>af', 'x'), desc('gr', 'n'), desc('ga', 'n'),
})
require('tandem').setup({ keymaps = false })
T.put('none', desc('<leader>ae', 'x'))
"#,
    )
    .await;
    assert_eq!(
        got.get("maps"),
        &json!([
            "tandem: accept the hunk under the cursor",
            "",
            "tandem: reject the hunk under the cursor",
            "",
            "tandem: fix the selection",
            "",
            ""
        ])
    );
    assert_eq!(got.get("none"), &json!(""));
}

#[tokio::test]
async fn bad_command_input_says_what_is_wrong_and_starts_nothing() {
    if !super::harness::enabled() {
        return;
    }
    let ws = Workspace::new();
    let got = run(
        &ws,
        &json!({}),
        r#"
local messages = {}
vim.notify = function(msg) table.insert(messages, msg) end
require('tandem').setup({})
vim.cmd('TandemMode bogus')
vim.cmd('TandemReviewAccept')
vim.cmd('TandemReviewAcceptAll')
vim.cmd('TandemReviewDiff')
T.put('messages', messages)
T.put('clients', #vim.lsp.get_clients({ name = 'tandem' }))
"#,
    )
    .await;
    assert_eq!(
        got.lines("messages"),
        [
            "tandem: mode must be one of read-only, review, auto",
            "tandem: no hunk under review at the cursor",
            "tandem: nothing to review",
            "tandem: this buffer has no changes under review",
        ]
    );
    assert_eq!(got.get("clients"), &json!(0));
}

#[tokio::test]
async fn a_daemon_without_the_exec_sandbox_is_reported_once_and_in_checkhealth() {
    if !super::harness::enabled() {
        return;
    }
    let server = ModelServer::start().await;
    let ws = Workspace::new();
    let got = run(
        &ws,
        &config(&server, "auto"),
        r#"
local messages = {}
vim.notify = function(msg, level)
  table.insert(messages, { msg = msg, level = level })
end
-- The daemon inherits Neovim's environment.
vim.env.TANDEM_SANDBOX_SIMULATE_UNAVAILABLE = '1'
T.setup()
require('tandem.client').start()
T.wait(function() return require('tandem.client').ready() and #messages >= 1 end, 'the warning')
T.put('messages', messages)
vim.cmd('checkhealth tandem')
T.put('report', T.lines(0))
"#,
    )
    .await;
    let messages = got.get("messages").as_array().unwrap().clone();
    assert_eq!(messages.len(), 1, "{messages:?}");
    let warning = messages[0]["msg"].as_str().unwrap();
    assert!(
        warning.starts_with("tandem: exec sandbox unavailable: simulated"),
        "{warning}"
    );
    assert_eq!(messages[0]["level"], json!(3), "vim.log.levels.WARN");
    let report = got.text("report");
    assert!(
        report.contains("WARNING exec sandbox unavailable: simulated"),
        "{report}"
    );
}
