//! The chat buffer: tool calls as one line each and the plan as a
//! checklist, both updated in place; a long fast stream arrives whole;
//! cancel during a slow stream, then the next prompt works.

use serde_json::json;

use super::harness::{config, run, Workspace};
use crate::support::model_server::{openai, ModelServer, Reply, SseStep};

fn plan(steps: serde_json::Value) -> String {
    json!({ "plan": steps }).to_string()
}

#[tokio::test]
async fn tool_calls_and_the_plan_are_updated_in_place() {
    if !super::harness::enabled() {
        return;
    }
    let server = ModelServer::start().await;
    server.push(openai::tool_calls(&[(
        "call_plan1",
        "update_plan",
        &plan(json!([{"step": "Read a.txt", "status": "in_progress"}, {"step": "Explain it", "status": "pending"}])),
    )]));
    server.push(openai::tool_calls(&[(
        "call_read",
        "read_file",
        r#"{"path":"a.txt"}"#,
    )]));
    server.push(openai::tool_calls(&[(
        "call_plan2",
        "update_plan",
        &plan(json!([{"step": "Read a.txt", "status": "completed"}, {"step": "Explain it", "status": "in_progress"}])),
    )]));
    server.push(openai::text(["It says hi."]));
    let ws = Workspace::new();
    ws.write("a.txt", "hi\n");
    let got = run(
        &ws,
        &config(&server, "read-only"),
        r#"
T.setup()
vim.cmd('TandemPrompt explain a.txt')
T.turn(1)
T.put('chat', T.chat_lines())
"#,
    )
    .await;
    let chat = got.lines("chat");
    let text = chat.join("\n");
    assert_eq!(
        chat.iter().filter(|l| l.as_str() == "**Plan**").count(),
        1,
        "{text}"
    );
    assert!(
        text.contains("**Plan**\n- [x] Read a.txt\n- [~] Explain it"),
        "{text}"
    );
    let reads: Vec<&String> = chat
        .iter()
        .filter(|l| l.contains("Read a.txt") && l.contains("`read`"))
        .collect();
    assert_eq!(reads.len(), 1, "{text}");
    assert!(reads[0].ends_with("· done"), "{text}");
    assert!(text.contains("## explain a.txt"), "{text}");
    assert!(text.contains("It says hi."), "{text}");
    assert!(text.contains("[end_turn]"), "{text}");
}

#[tokio::test]
async fn a_stream_of_5000_chunks_lands_whole_in_the_chat() {
    if !super::harness::enabled() {
        return;
    }
    let server = ModelServer::start().await;
    let pieces: Vec<String> = (0..5000)
        .map(|i| {
            if i % 50 == 49 {
                format!("w{i}\n")
            } else {
                format!("w{i} ")
            }
        })
        .collect();
    let mut steps = vec![openai::delta(json!({"role": "assistant", "content": ""}))];
    steps.extend(
        pieces
            .iter()
            .map(|p| openai::delta(json!({ "content": p }))),
    );
    steps.extend(openai::ending("stop"));
    server.push(Reply::Sse(steps));
    let ws = Workspace::new();
    let got = run(
        &ws,
        &config(&server, "read-only"),
        r#"
T.setup()
local start = vim.uv.hrtime()
vim.cmd('TandemPrompt stream a lot')
T.turn(1)
T.put('ms', (vim.uv.hrtime() - start) / 1e6)
T.put('chat', T.chat_lines())
"#,
    )
    .await;
    let chat = got.text("chat");
    let whole: String = pieces.concat();
    assert!(
        chat.contains(whole.trim_end()),
        "the streamed text is not whole in the chat"
    );
    eprintln!("5000 chunks in {} ms", got.get("ms"));
}

#[tokio::test]
async fn cancel_during_a_slow_stream_then_the_next_prompt_works() {
    if !super::harness::enabled() {
        return;
    }
    let server = ModelServer::start().await;
    server.push(Reply::Sse(vec![
        openai::delta(json!({"role": "assistant", "content": ""})),
        openai::delta(json!({"content": "slowly "})),
        SseStep::Stall,
    ]));
    server.push(openai::text(["second answer"]));
    let ws = Workspace::new();
    let got = run(
        &ws,
        &config(&server, "read-only"),
        r#"
T.setup()
vim.cmd('TandemPrompt first')
T.wait(function() return T.chat_text():find('slowly', 1, true) ~= nil end, 'the first chunk')
vim.cmd('TandemCancel')
T.put('first', T.turn(1))
vim.cmd('TandemPrompt second')
T.put('second', T.turn(2))
T.put('chat', T.chat_lines())
"#,
    )
    .await;
    assert_eq!(got.get("first")["stopReason"], "cancelled");
    assert_eq!(got.get("second")["stopReason"], "end_turn");
    let chat = got.text("chat");
    assert!(chat.contains("[cancelled"), "{chat}");
    assert!(chat.contains("second answer"), "{chat}");
}

#[tokio::test]
async fn the_editor_stays_responsive_while_1000_chunks_a_second_stream() {
    if !super::harness::enabled() {
        return;
    }
    let server = ModelServer::start().await;
    let mut steps = vec![openai::delta(json!({"role": "assistant", "content": ""}))];
    for i in 0..3000u64 {
        steps.push(SseStep::Until(std::time::Duration::from_millis(i)));
        steps.push(openai::delta(json!({ "content": format!("c{i} ") })));
    }
    steps.extend(openai::ending("stop"));
    server.push(Reply::Sse(steps));
    let ws = Workspace::new();
    let got = run(
        &ws,
        &config(&server, "read-only"),
        r#"
T.setup()
-- The longest the event loop went without running a 5 ms timer.
local last, worst = vim.uv.hrtime(), 0
local timer = vim.uv.new_timer()
timer:start(5, 5, vim.schedule_wrap(function()
  local now = vim.uv.hrtime()
  worst = math.max(worst, (now - last) / 1e6)
  last = now
end))
vim.cmd('TandemPrompt stream steadily')
T.wait(function() return T.chat_text():find('c10 ', 1, true) ~= nil end, 'the stream to start')
last, worst = vim.uv.hrtime(), 0
T.turn(1)
timer:stop()
T.put('worst_ms', worst)
T.put('chat', T.chat_lines())
"#,
    )
    .await;
    let worst = got.get("worst_ms").as_f64().expect("a number");
    eprintln!("longest event-loop stall while streaming: {worst:.1} ms");
    assert!(worst < 500.0, "the editor stalled for {worst:.1} ms");
    assert!(
        got.text("chat").contains("c2999 "),
        "the stream is not whole"
    );
}

#[tokio::test]
async fn tool_calls_of_different_turns_with_the_same_id_get_lines_of_their_own() {
    if !super::harness::enabled() {
        return;
    }
    let server = ModelServer::start().await;
    // Some local models number their calls from call_0 in every response.
    server.push(openai::tool_calls(&[(
        "call_0",
        "read_file",
        r#"{"path":"a.txt"}"#,
    )]));
    server.push(openai::text(["one"]));
    server.push(openai::tool_calls(&[(
        "call_0",
        "read_file",
        r#"{"path":"b.txt"}"#,
    )]));
    server.push(openai::text(["two"]));
    let ws = Workspace::new();
    ws.write("a.txt", "a\n");
    ws.write("b.txt", "b\n");
    let got = run(
        &ws,
        &config(&server, "read-only"),
        r#"
T.setup()
vim.cmd('TandemPrompt first')
T.turn(1)
vim.cmd('TandemPrompt second')
T.turn(2)
T.put('chat', T.chat_lines())
"#,
    )
    .await;
    let chat = got.text("chat");
    assert!(chat.contains("- `read` Read a.txt · done"), "{chat}");
    assert!(chat.contains("- `read` Read b.txt · done"), "{chat}");
    let first = chat.find("Read a.txt").expect("first");
    let second = chat.find("## second").expect("second prompt");
    assert!(first < second, "{chat}");
}

#[tokio::test]
async fn the_models_reasoning_is_quoted_above_its_answer() {
    if !super::harness::enabled() {
        return;
    }
    let server = ModelServer::start().await;
    server.push(openai::reasoning_then_text(
        &["let me ", "think\nabout it"],
        &["The answer."],
    ));
    let ws = Workspace::new();
    let got = run(
        &ws,
        &config(&server, "read-only"),
        r#"
T.setup()
vim.cmd('TandemPrompt think')
T.turn(1)
T.put('chat', T.chat_lines())
"#,
    )
    .await;
    let chat = got.text("chat");
    assert!(
        chat.contains("> let me think\n> about it\nThe answer."),
        "{chat}"
    );
}
