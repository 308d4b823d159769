//! The request body a session builds incrementally (each message's cached
//! serialized form, the repair checks continuing from where they passed)
//! equals, byte for byte, the body built from scratch, after every kind of
//! step and for both providers: the same messages serialized from scratch,
//! and a second projection fed the same events whose repair pipeline checks
//! the whole history every time (as before the caches), serialized from
//! scratch.
//!
//! Not compared: the log folded again and repaired once. That differs, by
//! design of the repair pipeline and not of the caches, when call ids were
//! renamed at different requests (the renaming counter starts again with
//! each pass), so a reloaded session may give a renamed call another id.

use std::sync::Arc;

use super::{Projection, RepairLimits};
use crate::config::{ModelConfig, ProviderKind};
use crate::provider::{from_config, ModelRequest, Provider, ToolSpec};
use crate::vocab::event::{
    Event, FinishReason, Thinking, ToolCallRequest, ToolStatus, Usage, UserContent,
};

const SYSTEM: &str = "You are tandem.\n\nWorkspace: /w";

fn provider(kind: ProviderKind, model: &str) -> Arc<dyn Provider> {
    from_config(&ModelConfig {
        provider: kind,
        base_url: "http://127.0.0.1:9/v1".into(),
        name: model.into(),
        ..ModelConfig::default()
    })
}

fn user(text: &str) -> Event {
    Event::UserMessage {
        turn_id: "t1".into(),
        message_id: format!("m-{text}"),
        content: vec![UserContent::Text { text: text.into() }],
    }
}

fn call(id: &str, arguments: &str) -> ToolCallRequest {
    ToolCallRequest {
        id: id.into(),
        name: "read_file".into(),
        arguments: arguments.into(),
    }
}

fn assistant(text: &str, thinking: Option<Thinking>, calls: Vec<ToolCallRequest>) -> Event {
    Event::AssistantMessage {
        turn_id: "t1".into(),
        step: 1,
        attempt: 1,
        provider: "openai".into(),
        model: "m".into(),
        text: text.into(),
        thinking,
        finish_reason: if calls.is_empty() {
            FinishReason::Stop
        } else {
            FinishReason::ToolCalls
        },
        tool_calls: calls,
        usage: Usage::default(),
    }
}

fn result(id: &str, status: ToolStatus, output: &str) -> Event {
    Event::ToolResult {
        turn_id: "t1".into(),
        call_id: id.into(),
        status,
        output: output.into(),
    }
}

/// A session's log and its live projection, requested from as the driver
/// does: repair, then the body from the caches.
struct Session {
    log: Vec<Event>,
    live: Projection,
    /// Fed the same events, repaired over the whole history each time.
    reference: Projection,
    limits: RepairLimits,
    tools: Vec<ToolSpec>,
    requests: usize,
    /// Old results that kept only their serialized form, over all steps.
    kept_serialized: usize,
}

impl Session {
    fn new() -> Session {
        Session {
            log: Vec::new(),
            live: Projection::new(SYSTEM.into()),
            reference: Projection::new(SYSTEM.into()),
            limits: RepairLimits::default(),
            tools: vec![ToolSpec {
                name: "read_file".into(),
                description: "Reads a file".into(),
                parameters: serde_json::json!({"type": "object", "properties": {"path": {"type": "string"}}}),
            }],
            requests: 0,
            kept_serialized: 0,
        }
    }

    fn record(&mut self, events: impl IntoIterator<Item = Event>) {
        for event in events {
            self.live.apply(&event);
            self.reference.apply(&event);
            self.log.push(event);
        }
    }

    /// One step's request through `provider`, checked against both
    /// from-scratch builds.
    fn request(&mut self, provider: &dyn Provider) {
        self.requests += 1;
        let n = self.requests;
        self.live.repair(self.limits);
        fn request<'a>(projection: &'a Projection, tools: &'a [ToolSpec]) -> ModelRequest<'a> {
            ModelRequest {
                messages: projection.messages(),
                tools,
                max_output_tokens: None,
            }
        }
        let built = provider.request_body(request(&self.live, &self.tools));
        let same_messages = provider.request_body_from_scratch(request(&self.live, &self.tools));
        assert_eq!(
            String::from_utf8_lossy(&built),
            String::from_utf8_lossy(&same_messages),
            "request {n} ({}): the cached body differs from the same messages serialized from scratch",
            provider.name()
        );
        self.reference.repair_whole(self.limits);
        let scratch = provider.request_body_from_scratch(request(&self.reference, &self.tools));
        assert_eq!(
            String::from_utf8_lossy(&built),
            String::from_utf8_lossy(&scratch),
            "request {n} ({}): the incremental body differs from the history repaired whole and serialized from scratch",
            provider.name()
        );
        assert_eq!(
            self.live.estimated_tokens(),
            self.reference.estimated_tokens()
        );
        serde_json::from_slice::<serde_json::Value>(&built).expect("the body is JSON");
        // As at a turn's end, but after every step: what the next steps
        // read back must be what was dropped.
        self.kept_serialized += self.live.keep_old_results_serialized();
    }
}

#[test]
fn every_kind_of_step_builds_the_body_a_from_scratch_build_would() {
    let openai = provider(ProviderKind::Openai, "m");
    let anthropic = provider(ProviderKind::Anthropic, "m");
    let both = [openai.clone(), anthropic.clone()];
    let mut s = Session::new();

    s.record([user("read a, b and c")]);
    s.request(&*openai);

    // Tool results, logged as the calls end (another order than called).
    s.record([assistant(
        "Reading.",
        None,
        vec![
            call("c1", r#"{"path":"a"}"#),
            call("c2", r#"{"path":"b"}"#),
            call("c3", r#"{"path":"c"}"#),
        ],
    )]);
    s.record([
        result("c3", ToolStatus::Completed, "C"),
        result("c1", ToolStatus::Failed, "no such file"),
        result("c2", ToolStatus::Completed, "B \"quoted\" \u{1F600}\n"),
    ]);
    s.request(&*openai);

    // A steer entered between steps, then an inject ahead of a prompt.
    s.record([
        assistant("", None, vec![call("c4", r#"{"path":"d"}"#)]),
        result("c4", ToolStatus::Completed, "D"),
        user("also look at e"),
    ]);
    s.request(&*openai);
    s.record([
        assistant("Done.", None, vec![]),
        user("context: tests live in tests/"),
        user("go on"),
    ]);
    s.request(&*openai);

    // Provider switch: the Messages API shape, with signed thinking and
    // malformed arguments, built from the other cache.
    s.record([assistant(
        "Checking.",
        Some(Thinking {
            text: "need e".into(),
            signature: Some("sig-1".into()),
        }),
        vec![call("c5", r#"{"path":"e"}"#), call("c6", r#"{"path":"#)],
    )]);
    s.record([
        result("c6", ToolStatus::Rejected, "bad arguments"),
        result("c5", ToolStatus::Completed, "E"),
    ]);
    s.request(&*anthropic);
    s.request(&*openai);

    // Repair of an orphaned call (a turn cut off before its result), of a
    // result answering no call, and of a reused call id.
    s.record([
        assistant("", None, vec![call("c7", "{}")]),
        user("never mind that"),
    ]);
    s.request(&*anthropic);
    s.record([
        result("ghost", ToolStatus::Completed, "answers nothing"),
        assistant("", None, vec![call("c1", r#"{"path":"a"}"#)]),
        result("c1", ToolStatus::Completed, "A again"),
    ]);
    for p in &both {
        s.request(&**p);
    }
    s.record([
        assistant("", None, vec![call("bad id!", "{}")]),
        result("bad id!", ToolStatus::Completed, "odd id"),
    ]);
    for p in &both {
        s.request(&**p);
    }

    // Long results, each requested while recent, then shortened as they
    // age: the shortened messages must not be served from the cache.
    for i in 0..12 {
        let id = format!("big{i}");
        s.record([
            assistant("", None, vec![call(&id, "{}")]),
            result(&id, ToolStatus::Completed, &format!("{i}").repeat(3_000)),
        ]);
        s.request(&*both[i % 2]);
    }
    for p in &both {
        s.request(&**p);
    }

    // Compaction: the summary replaces all but the head and the last four.
    s.record([Event::Compacted {
        turn_id: "t1".into(),
        summary: Some("read a to e; big outputs".into()),
        removed: 30,
        keep_last: 4,
        error: None,
        ledger: None,
        usage: Usage::default(),
    }]);
    for p in &both {
        s.request(&**p);
    }
    s.record([
        assistant("", None, vec![call("c8", "{}")]),
        result("c8", ToolStatus::Completed, "after compaction"),
    ]);
    for p in &both {
        s.request(&**p);
    }

    // Trimming to a small window drops the oldest units.
    s.limits.context_window = 3_000;
    for i in 0..6 {
        let id = format!("t{i}");
        s.record([
            assistant("", None, vec![call(&id, "{}")]),
            result(&id, ToolStatus::Completed, &"y".repeat(1_500)),
            user(&format!("next {i}")),
        ]);
        s.request(&*both[i % 2]);
    }

    // A model switch changes only the frame.
    s.request(&*provider(ProviderKind::Openai, "other-model"));
    s.request(&*provider(ProviderKind::Anthropic, "other-model"));
    assert!(
        s.kept_serialized > 0,
        "old results kept only their serialized form along the way"
    );
}

#[test]
fn old_results_keep_one_copy_and_read_back_exactly() {
    let openai = provider(ProviderKind::Openai, "m");
    let anthropic = provider(ProviderKind::Anthropic, "m");
    let mut s = Session::new();
    s.record([user("read them all")]);
    // Steps as the driver runs them: repair, the body from the caches,
    // and at each turn's end the old results keep one copy.
    for i in 0..20 {
        let id = format!("c{i}");
        // The Chat Completions form has no thinking: such a message keeps
        // its structured form.
        let thinking = (i == 3).then(|| Thinking {
            text: "why".into(),
            signature: None,
        });
        let text = if i % 2 == 0 { "" } else { "Reading \"it\"." };
        s.record([
            assistant(text, thinking, vec![call(&id, r#"{"path":"a\"b"}"#)]),
            result(
                &id,
                ToolStatus::Completed,
                &format!("line {i}\n\t\"quoted\" \\ \u{1F600} \u{7}"),
            ),
        ]);
        s.live.repair(s.limits);
        openai.request_body(ModelRequest {
            messages: s.live.messages(),
            tools: &s.tools,
            max_output_tokens: None,
        });
        s.live.keep_old_results_serialized();
    }
    // The newest 8 results are still read by the shortening pass; the 12
    // before them and their calls (but the one with thinking) hold one
    // copy, and nothing on the way read them back.
    let only = |kind: fn(&crate::provider::ModelMessage) -> bool| {
        s.live
            .messages
            .iter()
            .filter(|m| {
                !m.holds_message() && kind(&crate::provider::CachedMessage::clone(m).into_message())
            })
            .count()
    };
    assert_eq!(
        only(|m| matches!(m, crate::provider::ModelMessage::Tool { .. })),
        12
    );
    assert_eq!(
        only(|m| matches!(m, crate::provider::ModelMessage::Assistant { .. })),
        11
    );
    // Read back exactly: the same bodies as from scratch and as a history
    // that never dropped anything, from the provider whose form is kept
    // and from the other (which reads the messages back to build its own).
    s.request(&*openai);
    s.request(&*anthropic);
    assert_eq!(s.live.messages(), s.reference.messages());
    // A repair that changes old results reads them back first.
    s.limits.shorten_results_to = 4;
    s.request(&*openai);
    let shortened = s
        .live
        .messages()
        .iter()
        .filter(|m| {
            matches!(m.message(), crate::provider::ModelMessage::Tool { content, .. }
                if content.contains("bytes of this old result omitted"))
        })
        .count();
    assert_eq!(shortened, 12);
}

#[test]
fn a_changed_message_loses_its_serialized_forms() {
    let openai = provider(ProviderKind::Openai, "m");
    let mut s = Session::new();
    s.record([user("q")]);
    s.request(&*openai);
    let cached = s.live.messages()[1].cached_bytes();
    assert!(cached > 0, "the request cached the message");
    let crate::provider::ModelMessage::User { text, .. } = s.live.messages_mut()[1].message_mut()
    else {
        panic!("a user message");
    };
    text.push_str(" changed");
    assert_eq!(s.live.messages()[1].cached_bytes(), 0);
    let body = openai.request_body(ModelRequest {
        messages: s.live.messages(),
        tools: &[],
        max_output_tokens: None,
    });
    assert!(String::from_utf8_lossy(&body).contains("q changed"));
}

#[test]
fn a_history_with_images_builds_the_body_a_from_scratch_build_would() {
    use crate::vocab::image::ImageData;
    let image = |data: &str| UserContent::Image {
        mime_type: "image/png".into(),
        sha256: format!("{:0>64}", data.len()),
        bytes: 3,
        data: ImageData(Some(data.into())),
    };
    let with_images = |text: &str| Event::UserMessage {
        turn_id: "t1".into(),
        message_id: format!("m-{text}"),
        content: vec![
            UserContent::Text { text: text.into() },
            image("iVBORw0KGgo="),
            image("R0lGODlh"),
        ],
    };
    let openai = provider(ProviderKind::Openai, "m");
    let anthropic = provider(ProviderKind::Anthropic, "m");
    let mut s = Session::new();
    s.record([with_images("what are these?")]);
    s.request(&*openai);
    s.request(&*anthropic);
    s.record([
        assistant("", None, vec![call("c1", r#"{"path":"a"}"#)]),
        result("c1", ToolStatus::Completed, "A"),
    ]);
    s.request(&*openai);
    s.record([assistant("Two images.", None, vec![]), user("thanks")]);
    s.request(&*anthropic);
    s.request(&*openai);
    // An image-only prompt (no text part), and one whose file is gone.
    s.record([Event::UserMessage {
        turn_id: "t2".into(),
        message_id: "m-image-only".into(),
        content: vec![image("AAAA")],
    }]);
    s.record([Event::UserMessage {
        turn_id: "t2".into(),
        message_id: "m-gone".into(),
        content: vec![UserContent::Image {
            mime_type: "image/jpeg".into(),
            sha256: "f".repeat(64),
            bytes: 120 * 1024,
            data: ImageData(None),
        }],
    }]);
    s.request(&*openai);
    s.request(&*anthropic);
    let body = openai.request_body(ModelRequest {
        messages: s.live.messages(),
        tools: &[],
        max_output_tokens: None,
    });
    let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        body["messages"][1]["content"][1],
        serde_json::json!({"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}})
    );
    let last = body["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(
        last["content"],
        "[an image (jpg, 120 KB) was attached here; its file is no longer available]"
    );
}

#[test]
fn tool_images_follow_their_block_of_results_in_every_body() {
    use crate::vocab::image::ImageData;
    let tool_image = |call_id: &str, data: Option<&str>| Event::ToolImage {
        turn_id: "t1".into(),
        call_id: call_id.into(),
        mime_type: "image/png".into(),
        sha256: "a".repeat(64),
        bytes: 3,
        data: ImageData(data.map(Into::into)),
    };
    let openai = provider(ProviderKind::Openai, "m");
    let anthropic = provider(ProviderKind::Anthropic, "m");
    let mut s = Session::new();
    s.record([user("look at both")]);
    s.record([assistant(
        "",
        None,
        vec![call("c1", r#"{"path":"a"}"#), call("c2", r#"{"path":"b"}"#)],
    )]);
    // The second call ends first, with an image; the block is then open.
    s.record([
        tool_image("c2", Some("iVBORw0KGgo=")),
        result("c2", ToolStatus::Completed, "B"),
    ]);
    assert!(!s.live.messages().iter().any(|m| matches!(
        m.message(),
        crate::provider::ModelMessage::User { images, .. } if !images.is_empty()
    )));
    s.record([
        tool_image("c1", None),
        result("c1", ToolStatus::Completed, "A"),
    ]);
    s.request(&*openai);
    s.request(&*anthropic);
    let body = openai.request_body(ModelRequest {
        messages: s.live.messages(),
        tools: &[],
        max_output_tokens: None,
    });
    let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
    let roles: Vec<&str> = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        ["system", "user", "assistant", "tool", "tool", "user"]
    );
    assert_eq!(
        body["messages"][5]["content"],
        serde_json::json!([
            {"type": "text", "text": "The images returned by tool calls c2, c1:\n[an image (png, 3 B) returned by tool call c1; its file is no longer available]"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
        ])
    );
    // The Messages API: one user turn, the results first, then the image.
    let body = anthropic.request_body(ModelRequest {
        messages: s.live.messages(),
        tools: &[],
        max_output_tokens: None,
    });
    let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
    let kinds: Vec<&str> = body["messages"][2]["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["tool_result", "tool_result", "text", "image"]);
    assert_eq!(
        body["messages"][2]["content"][3]["source"],
        serde_json::json!({"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="})
    );
    s.record([assistant("Seen.", None, vec![]), user("thanks")]);
    s.request(&*openai);
    s.request(&*anthropic);
}
