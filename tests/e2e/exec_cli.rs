//! `tandem exec`: one task headless, answer on stdout, tool activity on
//! stderr, exit status from the stop reason.

use serde_json::json;

use crate::support::client::tandem_bin;
use crate::support::model_server::{openai, ModelServer};

async fn exec(server: &ModelServer, root: &std::path::Path, args: &[&str]) -> std::process::Output {
    let home = tempfile::tempdir().unwrap();
    tokio::process::Command::new(tandem_bin())
        .arg("exec")
        .args(args)
        .current_dir(root)
        .env("TANDEM_HOME", home.path())
        .env("TANDEM_BASE_URL", server.base_url())
        .env("TANDEM_MODEL", "scripted-model")
        .env("TANDEM_LOG", "warn")
        .env_remove("TANDEM_PROVIDER")
        .output()
        .await
        .unwrap()
}

#[tokio::test]
async fn exec_streams_the_answer_to_stdout_and_tools_to_stderr() {
    let server = ModelServer::start().await;
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("notes.txt"), "one\ntwo\nthree\nfour\n").unwrap();
    server.push(openai::tool_calls(&[(
        "c1",
        "read_file",
        r#"{"path":"notes.txt"}"#,
    )]));
    server.push(openai::text(["It has ", "four lines."]));
    let output = exec(
        &server,
        root.path(),
        &["summarize", "--file", "notes.txt", "--range", "2:3"],
    )
    .await;
    let stdout = String::from_utf8(output.stdout).unwrap();
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(output.status.success(), "{stderr}");
    assert_eq!(stdout.trim(), "It has four lines.");
    assert!(stderr.contains("→ Read notes.txt"), "{stderr}");
    assert!(stderr.contains("✓"), "{stderr}");
    // The attached range is in the prompt, the rest of the file is not.
    let first = &server.requests()[0].body["messages"];
    let prompt = first.as_array().unwrap().last().unwrap()["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(prompt.starts_with("summarize"), "{prompt}");
    assert!(
        prompt.contains("two\nthree") && !prompt.contains("four"),
        "{prompt}"
    );
    assert!(prompt.contains("#L2-L3"), "{prompt}");
}

#[tokio::test]
async fn exec_exit_status_follows_the_stop_reason() {
    let server = ModelServer::start().await;
    let root = tempfile::tempdir().unwrap();
    server.push(openai::error(401, "bad key"));
    let output = exec(&server, root.path(), &["hi"]).await;
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.contains("stopped (error)") && stderr.contains("bad key"),
        "{stderr}"
    );

    // In review mode there is nobody to ask: the command is refused, the
    // model reads why, and the task still ends normally.
    server.push(openai::tool_calls(&[(
        "c1",
        "exec_command",
        &json!({"cmd": "touch made"}).to_string(),
    )]));
    server.push(openai::text(["could not run it"]));
    let output = exec(&server, root.path(), &["make a file"]).await;
    assert!(output.status.success());
    assert!(!root.path().join("made").exists());
    let requests = server.requests();
    let tool = requests.last().unwrap().body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap()
        .clone();
    assert!(
        tool["content"].as_str().unwrap().starts_with("rejected:"),
        "{tool}"
    );

    // --mode auto lets it act.
    server.push(openai::tool_calls(&[(
        "c2",
        "exec_command",
        &json!({"cmd": "touch made"}).to_string(),
    )]));
    server.push(openai::text(["done"]));
    let output = exec(&server, root.path(), &["make a file", "--mode", "auto"]).await;
    assert!(output.status.success());
    assert!(root.path().join("made").exists());

    let output = exec(&server, root.path(), &["x", "--mode", "yolo"]).await;
    assert_eq!(output.status.code(), Some(2));
}

#[tokio::test]
async fn a_retried_stream_leaves_no_partial_text_on_piped_stdout() {
    use crate::support::model_server::{Reply, SseStep};
    let server = ModelServer::start().await;
    let root = tempfile::tempdir().unwrap();
    server.push(Reply::Sse(vec![
        openai::delta(json!({"content": "Hal"})),
        SseStep::Drop,
    ]));
    server.push(openai::text(["Hello ", "world"]));
    let output = exec(&server, root.path(), &["greet"]).await;
    assert!(output.status.success());
    assert_eq!(
        String::from_utf8(output.stdout).unwrap().trim(),
        "Hello world"
    );
    assert!(String::from_utf8(output.stderr)
        .unwrap()
        .contains("[retrying"));
    assert_eq!(server.requests().len(), 2);
}
