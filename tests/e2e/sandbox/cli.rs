//! `tandem exec` runs commands in the same sandbox.

use serde_json::json;

use super::{exec_call, var_tmp_dir, SIMULATE_UNAVAILABLE};
use crate::support::client::tandem_bin;
use crate::support::model_server::{openai, ModelServer};

async fn exec_auto(server: &ModelServer, root: &std::path::Path, env: &[(&str, &str)]) -> String {
    let home = tempfile::tempdir().unwrap();
    let output = tokio::process::Command::new(tandem_bin())
        .args(["exec", "--mode", "auto", "do it"])
        .current_dir(root)
        .env("TANDEM_HOME", home.path())
        .env("TANDEM_BASE_URL", server.base_url())
        .env("TANDEM_MODEL", "scripted-model")
        .env("TANDEM_LOG", "warn")
        .env_remove("TANDEM_PROVIDER")
        .envs(env.iter().copied())
        .output()
        .await
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let requests = server.wait_for_requests(2).await;
    super::tool_result(&requests[1], "call_1")
}

#[tokio::test]
async fn tandem_exec_confines_commands_and_without_a_sandbox_runs_none() {
    if !super::kernel_can_sandbox() {
        return;
    }
    let server = ModelServer::start().await;
    let root = var_tmp_dir();
    let outside = var_tmp_dir();
    let target = outside.path().join("x");
    let cmd = format!("touch inside; touch {}", target.display());
    server.push(exec_call("call_1", json!({ "cmd": cmd })));
    server.push(openai::text(["done"]));

    let result = exec_auto(&server, root.path(), &[]).await;
    assert!(root.path().join("inside").exists(), "{result}");
    assert!(!target.exists(), "{result}");
    assert!(result.contains("denied by the sandbox"), "{result}");

    // No sandbox and no editor to ask: nothing runs.
    let server = ModelServer::start().await;
    server.push(exec_call("call_1", json!({"cmd": "touch unasked"})));
    server.push(openai::text(["done"]));
    let result = exec_auto(&server, root.path(), &[(SIMULATE_UNAVAILABLE, "1")]).await;
    assert!(!root.path().join("unasked").exists(), "{result}");
    assert!(
        result.contains("the exec sandbox is unavailable here"),
        "{result}"
    );
}
