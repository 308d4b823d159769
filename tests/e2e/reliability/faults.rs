//! Fault injection on the model connection: 200 turns in one daemon, each
//! meeting a seeded plan of faults from the scripted server's fault mode
//! (429 with Retry-After, 5xx, a reset mid-stream, stalls before and
//! after the first chunk, malformed SSE, truncated tool-call JSON). Every
//! turn must end as its plan predicts — the answer after retries, or a
//! structured `error` naming the failure — within a cap, and the daemon
//! must answer `tandem/listSessions` while a turn is stalled.
//!
//! The stall timeouts are a second: a well answer that a busy machine
//! holds back a moment must never be taken for a stall (with 120 ms it
//! was, now and then, on a loaded 2-core machine: one retry more than the
//! plan, and the turn ended otherwise than predicted). So that 130-odd
//! stalls stay fast, the turns run [`LANES`] at a time, each lane in a
//! session of its own.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::gen::Gen;
use crate::support::client::Editor;
use crate::support::model_server::faults::{Expected, Fault};
use crate::support::model_server::{openai, ModelServer, RecordedRequest};

const TURNS: usize = 200;

/// No turn may take longer than this, whatever its faults (at most four
/// stalls of [`STALL_SECS`] each).
const TURN_CAP: Duration = Duration::from_secs(10);

/// The stall timeouts the daemon runs with here (first token and between
/// chunks), in seconds: far above what a busy machine holds back a well
/// answer, far below [`TURN_CAP`] for a turn's stalls together.
const STALL_SECS: f64 = 1.0;

/// Turns running at once, each lane in its own session.
const LANES: usize = 10;

/// The faults a turn meets, in order, before the server answers well.
#[derive(Debug, Clone)]
struct Plan {
    faults: Vec<Fault>,
}

/// What a plan must end in.
#[derive(Debug, PartialEq)]
enum Outcome {
    Answer,
    /// `error`, the message naming this failure kind and, for one that is
    /// retried, how many attempts of it the step made (`None`: fatal).
    Error(&'static str, Option<usize>),
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
                        return Outcome::Error(kind, Some(*count + 1));
                    }
                    *count += 1;
                    turn_retries += 1;
                }
                Expected::Fatal { kind } => return Outcome::Error(kind, None),
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

/// A turn waiting for its receipt.
struct Running {
    turn: usize,
    lane: usize,
    prompt: i64,
    list: i64,
    /// How many messages had come before it started.
    from: usize,
    started: Instant,
}

/// A turn that ended: what [`check_turn`] reads.
struct Ended<'a> {
    turn: usize,
    session: &'a str,
    plan: &'a Plan,
    receipt: &'a Value,
    /// Where the receipt is among the messages received.
    receipt_at: usize,
    /// How many messages had come before the turn started.
    from: usize,
    /// When each of its model calls arrived.
    times: &'a [Instant],
}

/// Checks a turn's receipt, and the updates before it, against its plan;
/// returns its stop reason.
fn check_turn(ended: &Ended, received: &[Value], seed: u64) -> String {
    let Ended {
        turn,
        session,
        plan,
        receipt,
        receipt_at,
        from,
        times,
    } = *ended;
    let context = || format!("seed {seed}, turn {turn}, plan {:?}", plan.faults);
    let result = &receipt["result"];
    let stop = result["stopReason"]
        .as_str()
        .unwrap_or_else(|| panic!("{receipt} ({})", context()));
    let updates: Vec<_> = received[from..receipt_at]
        .iter()
        .filter(|m| {
            m["method"] == "tandem/update"
                && m["params"]["sessionId"] == session
                && m["params"]["turnId"] == result["turnId"]
        })
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
        Outcome::Error(kind, attempts) => {
            assert_eq!(stop, "error", "{receipt} ({})", context());
            let message = result["message"].as_str().unwrap_or_default();
            let names_it = match attempts {
                None if kind == "protocol" => message.contains("not valid JSON"),
                None => message.starts_with(&format!("{kind} after ")),
                // The retry bucket, exactly: one retry more or less is a
                // different count.
                Some(n) => message.starts_with(&format!("{kind} after {n} attempts")),
            };
            assert!(names_it, "{kind}: {message} ({})", context());
        }
        Outcome::Loop => assert_eq!(stop, "loop_detected", "{receipt} ({})", context()),
    }
    // A 429's Retry-After was waited out before the next attempt.
    for (attempt, fault) in plan.faults.iter().enumerate() {
        if let (Fault::RateLimited { retry_after_ms }, Some(next)) = (fault, times.get(attempt + 1))
        {
            let waited = *next - times[attempt];
            assert!(
                waited >= Duration::from_millis(*retry_after_ms),
                "retried after {waited:?}, before retry-after-ms {retry_after_ms} ({})",
                context()
            );
        }
    }
    stop.to_string()
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
    let mut sessions = Vec::new();
    for _ in 0..LANES {
        sessions.push(editor.new_session(config.clone()).await);
    }

    let started = Instant::now();
    let mut outcomes: HashMap<String, usize> = HashMap::new();
    let mut faults_met = 0;
    let mut running: Vec<Running> = Vec::new();
    // The `tandem/listSessions` asked with each turn: when answered.
    let mut listed: HashMap<i64, Option<usize>> = HashMap::new();
    let mut next = 0;
    loop {
        // Every free lane starts the next turn.
        while next < TURNS && running.len() < LANES {
            let lane = (0..LANES)
                .find(|l| running.iter().all(|r| r.lane != *l))
                .expect("a free lane");
            let from = editor.received.len();
            let prompt = editor
                .start_prompt(&sessions[lane], &format!("turn {next}"))
                .await;
            let list = editor.start_request("tandem/listSessions", json!({})).await;
            listed.insert(list, None);
            running.push(Running {
                turn: next,
                lane,
                prompt,
                list,
                from,
                started: Instant::now(),
            });
            next += 1;
        }
        let Some(first) = running.iter().min_by_key(|r| r.started) else {
            break;
        };
        let (first_turn, first_started) = (first.turn, first.started);
        let left = TURN_CAP.saturating_sub(first_started.elapsed());
        let message = tokio::time::timeout(left, editor.next_message())
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "the turn took over {TURN_CAP:?}: seed {seed}, turn {first_turn}, plan {:?}",
                    plans[first_turn].faults
                )
            });
        let at = editor.received.len() - 1;
        let Some(id) = message.get("id").and_then(Value::as_i64) else {
            continue;
        };
        if message.get("method").is_some() {
            continue;
        }
        if let Some(answered) = listed.get_mut(&id) {
            assert!(
                message["result"]["sessions"].is_array(),
                "{message} (seed {seed})"
            );
            *answered = Some(at);
            continue;
        }
        let Some(done) = running.iter().position(|r| r.prompt == id) else {
            continue;
        };
        let Running {
            turn,
            lane,
            list,
            from,
            started: turn_started,
            ..
        } = running.swap_remove(done);
        let plan = &plans[turn];
        let context = || format!("seed {seed}, turn {turn}, plan {:?}", plan.faults);
        let took = turn_started.elapsed();
        assert!(took < TURN_CAP, "{took:?} ({})", context());
        if plan.faults.first().is_some_and(|f| f.stalls()) {
            assert!(
                listed[&list].is_some_and(|l| l < at),
                "tandem/listSessions waited for a stalled turn ({})",
                context()
            );
        }
        let times = arrivals.lock().unwrap_or_else(|p| p.into_inner())[&turn].clone();
        let ended = Ended {
            turn,
            session: &sessions[lane],
            plan,
            receipt: &message,
            receipt_at: at,
            from,
            times: &times,
        };
        let stop = check_turn(&ended, &editor.received, seed);
        faults_met += plan.faults.len().min(times.len());
        *outcomes.entry(stop).or_default() += 1;
    }
    // Every `tandem/listSessions` is answered, after its turn or not.
    for (id, answered) in listed {
        if answered.is_none() {
            let (list, _) = editor.response(id).await;
            assert!(
                list["result"]["sessions"].is_array(),
                "{list} (seed {seed})"
            );
        }
    }
    eprintln!(
        "faults: {TURNS} turns in {LANES} lanes, {faults_met} faults served, in {:.1?}, seed {seed}; stop reasons {outcomes:?}",
        started.elapsed()
    );
}
