//! Fault injection on the model connection: 200 turns in one daemon, each
//! meeting a seeded plan of faults from the scripted server's fault mode
//! (429 with Retry-After, 5xx, a reset mid-stream, stalls before and
//! after the first chunk, malformed SSE, truncated tool-call JSON). Every
//! turn must end as its plan predicts — the answer after retries, or a
//! structured `error` naming the failure — within a cap, and the daemon
//! must answer `tandem/listSessions` while a turn is stalled.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;

use super::gen::Gen;
use crate::support::client::Editor;
use crate::support::model_server::faults::{Expected, Fault};
use crate::support::model_server::{openai, ModelServer, RecordedRequest};

const TURNS: usize = 200;

/// No turn may take longer than this, whatever its faults.
const TURN_CAP: Duration = Duration::from_secs(10);

/// The stall timeouts the daemon runs with here (first token and between
/// chunks), in seconds: short, so that 200 turns of stalls stay fast.
const STALL_SECS: f64 = 0.12;

/// The faults a turn meets, in order, before the server answers well.
#[derive(Debug, Clone)]
struct Plan {
    faults: Vec<Fault>,
}

/// What a plan must end in.
#[derive(Debug, PartialEq)]
enum Outcome {
    Answer,
    /// `error`, the message naming this failure kind.
    Error(&'static str),
    /// `loop_detected`: the same cut-off tool call three times in a turn
    /// is the model looping (src/core/driver/loops.rs).
    Loop,
}

impl Plan {
    fn random(g: &mut Gen) -> Plan {
        let retried = |g: &mut Gen| match g.below(7) {
            0 => Fault::RateLimited {
                retry_after_ms: g.below(40) as u64 + 10,
            },
            1 => Fault::ServerError(*g.pick(&[500, 502, 503, 504, 529])),
            2 => Fault::ResetMidStream,
            3 => Fault::StallBeforeHead,
            4 => Fault::StallBeforeFirstChunk,
            5 => Fault::StallAfterFirstChunk,
            _ => Fault::TruncatedToolCall,
        };
        let faults = match g.below(100) {
            // Clean.
            0..=14 => Vec::new(),
            // One to three recoverable faults.
            15..=79 => {
                let n = g.below(3) + 1;
                (0..n).map(|_| retried(g)).collect()
            }
            // A malformed stream somewhere: fatal.
            80..=89 => {
                let mut faults: Vec<Fault> = (0..g.below(2)).map(|_| retried(g)).collect();
                faults.push(Fault::MalformedSse);
                faults
            }
            // The same failure past its retry bucket.
            _ => {
                let fault = match g.below(4) {
                    0 => Fault::RateLimited { retry_after_ms: 5 },
                    1 => Fault::ServerError(503),
                    2 => Fault::ResetMidStream,
                    _ => Fault::StallBeforeFirstChunk,
                };
                vec![fault; 6]
            }
        };
        Plan { faults }
    }

    /// Replays tandem's retry rules (protocol.md, "Provider failures"):
    /// a bucket per kind within a step, at most 8 retries in a turn; and
    /// its loop detector: every truncated call is the same call, so the
    /// third in a turn stops it.
    fn outcome(&self) -> Outcome {
        let mut used: HashMap<&str, usize> = HashMap::new();
        let mut turn_retries = 0;
        let mut same_calls = 0;
        for fault in &self.faults {
            match fault.expected() {
                Expected::Retried { kind, retries } => {
                    let count = used.entry(kind).or_default();
                    if *count == retries || turn_retries == 8 {
                        return Outcome::Error(kind);
                    }
                    *count += 1;
                    turn_retries += 1;
                }
                Expected::Fatal { kind } => return Outcome::Error(kind),
                Expected::NextStep => {
                    used.clear();
                    same_calls += 1;
                    if same_calls == 3 {
                        return Outcome::Loop;
                    }
                }
            }
        }
        Outcome::Answer
    }
}

/// The number in "turn N", the last user message of a request.
fn turn_of(request: &RecordedRequest) -> usize {
    let messages = request.body["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let text = messages
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_string();
    text.trim_start_matches("turn ")
        .parse()
        .unwrap_or(usize::MAX)
}

/// When each turn's model calls arrived.
type Arrivals = Arc<Mutex<HashMap<usize, Vec<Instant>>>>;

fn serve_plans(server: &ModelServer, plans: Vec<Plan>) -> Arrivals {
    let arrivals: Arrivals = Arc::default();
    let seen = arrivals.clone();
    server.respond_with(move |request| {
        let turn = turn_of(request);
        let attempt = {
            let mut seen = seen.lock().unwrap_or_else(|p| p.into_inner());
            let times = seen.entry(turn).or_default();
            times.push(Instant::now());
            times.len() - 1
        };
        match plans.get(turn).and_then(|plan| plan.faults.get(attempt)) {
            Some(fault) => fault.reply(
                &format!("partial {turn} "),
                &format!("call_{turn}_{attempt}"),
            ),
            None => openai::text(["answer ", &turn.to_string()]),
        }
    });
    arrivals
}

#[tokio::test]
async fn every_turn_under_injected_model_faults_ends_in_its_answer_or_a_structured_error() {
    let mut g = Gen::for_suite("reliability::faults");
    let seed = g.seed;
    let plans: Vec<Plan> = (0..TURNS).map(|_| Plan::random(&mut g)).collect();
    let server = ModelServer::start().await;
    let arrivals = serve_plans(&server, plans.clone());
    let root = tempfile::tempdir().expect("workspace");
    let mut editor = Editor::spawn().await;
    editor.initialize(root.path()).await;
    let mut config = server.session_config_with(json!({
        "first_token_timeout_secs": STALL_SECS,
        "first_token_secs_per_1k": 0.0,
        "first_token_timeout_cap_secs": STALL_SECS,
        "chunk_timeout_secs": STALL_SECS,
    }));
    config["approval"] = json!({"mode": "auto"});
    let session = editor.new_session(config).await;

    let started = Instant::now();
    let mut outcomes: HashMap<String, usize> = HashMap::new();
    let mut faults_met = 0;
    for (turn, plan) in plans.iter().enumerate() {
        let context = || format!("seed {seed}, turn {turn}, plan {:?}", plan.faults);
        let turn_started = Instant::now();
        let from = editor.received.len();
        let prompt = editor.start_prompt(&session, &format!("turn {turn}")).await;
        let list = editor.start_request("tandem/listSessions", json!({})).await;
        let ((receipt, receipt_at), (listed, listed_at)) = tokio::time::timeout(TURN_CAP, async {
            let listed = editor.response(list).await;
            let receipt = editor.response(prompt).await;
            (receipt, listed)
        })
        .await
        .unwrap_or_else(|_| panic!("the turn took over {TURN_CAP:?}: {}", context()));
        assert!(
            listed["result"]["sessions"].is_array(),
            "{listed} ({})",
            context()
        );
        if plan.faults.first().is_some_and(|f| f.stalls()) {
            assert!(
                listed_at < receipt_at,
                "tandem/listSessions waited for a stalled turn ({})",
                context()
            );
        }

        let result = &receipt["result"];
        let stop = result["stopReason"]
            .as_str()
            .unwrap_or_else(|| panic!("{receipt} ({})", context()));
        let updates: Vec<_> = editor.received[from..receipt_at]
            .iter()
            .filter(|m| m["method"] == "tandem/update" && m["params"]["turnId"] == result["turnId"])
            .map(|m| m["params"]["update"].clone())
            .collect();
        let end = updates
            .last()
            .unwrap_or_else(|| panic!("no updates ({})", context()));
        assert_eq!(end["sessionUpdate"], "turn_end", "{}", context());
        assert_eq!(end["stopReason"], stop, "{}", context());
        match plan.outcome() {
            Outcome::Answer => {
                assert_eq!(stop, "end_turn", "{receipt} ({})", context());
                let after_reset = updates
                    .iter()
                    .rposition(|u| u["sessionUpdate"] == "agent_message_reset")
                    .map_or(0, |at| at + 1);
                let text: String = updates[after_reset..]
                    .iter()
                    .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
                    .filter_map(|u| u["content"]["text"].as_str())
                    .collect();
                assert_eq!(text, format!("answer {turn}"), "{}", context());
            }
            Outcome::Error(kind) => {
                assert_eq!(stop, "error", "{receipt} ({})", context());
                let message = result["message"].as_str().unwrap_or_default();
                let names_it = if kind == "protocol" {
                    message.contains("not valid JSON")
                } else {
                    message.starts_with(&format!("{kind} after "))
                };
                assert!(names_it, "{kind}: {message} ({})", context());
            }
            Outcome::Loop => assert_eq!(stop, "loop_detected", "{receipt} ({})", context()),
        }
        // A 429's Retry-After was waited out before the next attempt.
        let times = arrivals.lock().unwrap_or_else(|p| p.into_inner())[&turn].clone();
        for (attempt, fault) in plan.faults.iter().enumerate() {
            if let (Fault::RateLimited { retry_after_ms }, Some(next)) =
                (fault, times.get(attempt + 1))
            {
                let waited = *next - times[attempt];
                assert!(
                    waited >= Duration::from_millis(*retry_after_ms),
                    "retried after {waited:?}, before retry-after-ms {retry_after_ms} ({})",
                    context()
                );
            }
        }
        faults_met += plan.faults.len().min(times.len());
        *outcomes.entry(stop.to_string()).or_default() += 1;
        let took = turn_started.elapsed();
        assert!(took < TURN_CAP, "{took:?} ({})", context());
    }
    eprintln!(
        "faults: {TURNS} turns, {faults_met} faults served, in {:.1?}, seed {seed}; stop reasons {outcomes:?}",
        started.elapsed()
    );
}
