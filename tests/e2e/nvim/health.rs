//! `:checkhealth tandem` and setup()'s validation.

use serde_json::json;

use super::harness::{config, run, Workspace};
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
    assert!(report.contains(&format!("OK tandem {}", env!("CARGO_PKG_VERSION"))), "{report}");
    assert!(
        report.contains(&format!("OK model server reachable at {}", server.base_url())),
        "{report}"
    );
    assert!(!report.contains("ERROR"), "{report}");
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
    assert!(messages.contains("`cmd` must be table, got string"), "{messages}");
    assert!(messages.contains("`keymaps.review_accept` must be a string or false, got number"), "{messages}");
    assert!(messages.contains("`chat.width` must be a number, got string"), "{messages}");
    assert!(messages.contains("unknown setup() option(s) ignored: modle"), "{messages}");
    assert_eq!(got.get("command"), &json!(0), "nothing is set up from bad options");
    assert_eq!(got.get("good"), &json!(true));
}
