//! `:TandemModel` (vim.ui.select over the session's models, then the
//! model's efforts), `require('tandem').status()` and the chat window's
//! winbar: the model, the context in use and the cost.

use serde_json::json;

use super::harness::{config, run, Workspace};
use crate::support::model_server::{openai, ModelServer, MODEL_NAME};

#[tokio::test]
async fn tandem_model_switches_the_model_and_the_statusline_shows_the_context() {
    if !super::harness::enabled() {
        return;
    }
    let server = ModelServer::start().await;
    server.push(openai::text(["first"]));
    server.push(openai::text(["second"]));
    let ws = Workspace::new();
    let mut session_config = config(&server, "review");
    session_config["model"]["context_window"] = json!(64000);
    session_config["models"] = json!({"fast": {"name": "fast-model", "efforts": ["low", "high"],
                                               "context_window": 32000}});
    session_config["pricing"] =
        json!({"fast-model": {"input_per_mtok": 1000.0, "output_per_mtok": 2000.0}});
    let got = run(
        &ws,
        &session_config,
        r#"
T.setup()
T.put('before', require('tandem').status())
vim.cmd('TandemPrompt hello')
T.turn(1)
T.put('first', require('tandem').status())
local asked = {}
vim.ui.select = function(items, opts, on_choice)
  table.insert(asked, {
    kind = opts.kind,
    items = vim.tbl_map(function(item)
      return opts.format_item and opts.format_item(item) or item
    end, items),
  })
  on_choice(items[2])
end
local seen = #T.events
vim.cmd('TandemModel')
T.event('TandemModelSet', seen)
T.put('asked', asked)
T.put('switched', require('tandem').status())
vim.cmd('TandemPrompt again')
T.turn(2)
T.put('after', require('tandem').status())
local win = vim.fn.win_findbuf(vim.fn.bufnr('tandem://chat'))[1]
T.put('winbar', vim.api.nvim_eval_statusline(vim.wo[win].winbar, { winid = win, use_winbar = true }).str)
seen = #T.events
vim.cmd('TandemModel default')
T.event('TandemModelSet', seen)
T.put('back', require('tandem').status())
"#,
    )
    .await;
    assert_eq!(got.get("before"), &json!(""));
    assert_eq!(got.get("first"), &json!("default 15/64.0k (0%)"));
    assert_eq!(
        got.get("asked"),
        &json!([
            {"kind": "tandem.model", "items": [
                format!("default  {MODEL_NAME}, 64.0k tokens (current)"),
                "fast  fast-model, 32.0k tokens"]},
            {"kind": "tandem.effort", "items": ["low", "high"]}
        ])
    );
    assert_eq!(got.get("switched"), &json!("fast·high 15/32.0k (0%)"));
    let requests = server.requests();
    assert_eq!(requests[0].body["model"], MODEL_NAME);
    assert_eq!(requests[1].body["model"], "fast-model");
    assert_eq!(requests[1].body["reasoning_effort"], "high");
    // 10 input and 5 output tokens at $1000 and $2000 per million.
    assert_eq!(got.get("after"), &json!("fast·high 15/32.0k (0%) $0.0200"));
    assert_eq!(
        got.get("winbar"),
        &json!("tandem: fast·high 15/32.0k (0%) $0.0200")
    );
    assert_eq!(got.get("back"), &json!("default 15/64.0k (0%) $0.0200"));
}
