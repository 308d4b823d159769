//! `:TandemMcp` and `:checkhealth tandem` show the session's MCP servers.

use serde_json::json;

use super::harness::{config, run, Workspace};
use crate::support::model_server::{openai, ModelServer};

#[tokio::test]
async fn tandem_mcp_and_checkhealth_list_the_servers_with_state_and_tools() {
    if !super::harness::enabled() {
        return;
    }
    let server = ModelServer::start().await;
    server.push(openai::text(["hi"]));
    let ws = Workspace::new();
    let log = ws.path("fault.log");
    let fault = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mcp/fault_server.py");
    let mut config = config(&server, "review");
    config["mcp_servers"] = json!({
        "fault": {"command": "python3", "args": [fault, "tools", log], "startup_timeout_sec": 30},
        "silent": {"command": "python3", "args": [fault, "silent", log], "startup_timeout_sec": 1},
    });
    let got = run(
        &ws,
        &config,
        r#"
T.setup()
vim.cmd('TandemPrompt hi')
T.turn(1)
vim.cmd('TandemMcp')
T.wait(function() return vim.fn.bufnr('tandem://mcp') ~= -1 end, 'the :TandemMcp buffer')
T.put('mcp', T.lines(vim.fn.bufnr('tandem://mcp')))
vim.cmd('checkhealth tandem')
T.put('report', T.lines(0))
"#,
    )
    .await;
    let mcp = got.text("mcp");
    assert!(mcp.contains("fault: ready, 5 tools"), "{mcp}");
    assert!(mcp.contains("  mcp__fault__echo"), "{mcp}");
    assert!(mcp.contains("  mcp__fault__env (read-only)"), "{mcp}");
    assert!(
        mcp.contains("silent: failed (did not finish starting"),
        "{mcp}"
    );
    let report = got.text("report");
    assert!(report.contains("tandem: MCP servers"), "{report}");
    assert!(report.contains("OK fault: ready, 5 tools"), "{report}");
    assert!(report.contains("ERROR silent: failed"), "{report}");
}
