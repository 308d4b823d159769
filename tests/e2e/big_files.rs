//! Monorepo-sized files (issue 28): read_file of a 100 MB file through its
//! range, through the real binary, reads only as far as the window.

use std::io::Write;
use std::time::{Duration, Instant};

use crate::support::client::Editor;
use crate::support::model_server::{openai, ModelServer};

const FILE_BYTES: usize = 100 * 1024 * 1024;

/// `line N` padded to 100 bytes with its newline, until `FILE_BYTES`.
fn write_big_file(path: &std::path::Path) {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    for n in 1..=FILE_BYTES / 100 {
        writeln!(out, "{:<99}", format!("line {n}")).unwrap();
    }
    out.flush().unwrap();
}

#[tokio::test]
async fn read_file_of_a_100_mb_file_returns_its_range_without_reading_the_rest() {
    let server = ModelServer::start().await;
    server.push(openai::tool_calls(&[(
        "call_1",
        "read_file",
        r#"{"path":"big.log","offset":5001,"limit":200}"#,
    )]));
    server.push(openai::text(["done"]));
    let root = tempfile::tempdir().unwrap();
    write_big_file(&root.path().join("big.log"));
    let mut editor = Editor::spawn().await;
    editor.initialize(root.path()).await;
    let session = editor.new_session(server.session_config()).await;

    let started = Instant::now();
    let (response, _updates) = editor.prompt(&session, "read the log").await;
    let elapsed = started.elapsed();
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let requests = server.wait_for_requests(2).await;
    let results = requests[1].tool_messages();
    assert_eq!(results.len(), 1);
    let content = &results[0].1;
    let lines: Vec<&str> = content.lines().collect();
    assert_eq!(lines.len(), 201, "200 lines and the note: {content:.300}");
    assert_eq!(lines[0], format!("  5001\t{:<99}", "line 5001"));
    assert_eq!(lines[199], format!("  5200\t{:<99}", "line 5200"));
    // 5,200 lines of 100 bytes read; the rest neither read nor counted.
    assert_eq!(
        lines[200],
        format!(
            "[... more lines follow; the file has {FILE_BYTES} bytes, read to byte 520000; \
             continue with offset=5201]"
        )
    );
    assert!(
        elapsed < Duration::from_secs(5),
        "the turn took {elapsed:?}"
    );
    // The log holds what the model read.
    let log = editor.log_lines(&session);
    let result = log
        .iter()
        .find(|e| e["type"] == "tool_result")
        .expect("a tool_result event");
    assert!(
        result.to_string().contains("read to byte 520000"),
        "{result}"
    );
}
