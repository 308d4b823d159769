//! A scripted model server: real HTTP/1.1 on a loopback port, written on
//! tokio TCP so a test controls every byte, every chunk boundary and every
//! dropped connection.
//!
//! ```ignore
//! let server = ModelServer::start().await;
//! server.push(openai::text(["Hel", "lo"]));
//! server.push(Reply::Sse(vec![openai::delta(json!({"content": "Hel"})), SseStep::Drop]));
//! server.push(openai::error(429, "slow down").with_header("Retry-After", "2"));
//! // ... point a provider (or the daemon) at server.base_url() ...
//! let requests = server.wait_for_requests(1).await;
//! assert_eq!(requests[0].body["model"], "scripted-model");
//! ```
//!
//! `GET /v1/models` lists [`MODEL_NAME`] (or what [`ModelServer::set_models`]
//! sets). Both `POST /v1/chat/completions` and `POST /v1/messages` answer from the
//! one FIFO queue of replies; an empty queue asks the responder set with
//! [`ModelServer::respond_with`] (for tests whose requests arrive in no
//! fixed order), else answers HTTP 500 "no scripted reply". Every response
//! carries `Connection: close` and the socket is closed after it. Every
//! request is recorded, whatever its path.

pub mod anthropic;
pub mod faults;
mod http;
pub mod openai;
mod script;

pub use script::{RecordedRequest, Reply, SseStep};

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::sync::Notify;

use tandem::config::{ModelConfig, ProviderKind};

/// The model name [`ModelServer::model_config`] configures.
pub const MODEL_NAME: &str = "scripted-model";

/// How long the `wait_for_*` helpers wait before failing the test; a guard
/// against hangs, never a way of waiting for something.
const WAIT_LIMIT: Duration = Duration::from_secs(20);

/// Computes a reply from the request, when the FIFO queue is empty.
pub type Responder = Arc<dyn Fn(&RecordedRequest) -> Reply + Send + Sync>;

#[derive(Default)]
struct State {
    replies: Mutex<VecDeque<Reply>>,
    responder: Mutex<Option<Responder>>,
    requests: Mutex<Vec<RecordedRequest>>,
    chunk_write_times: Mutex<Vec<Instant>>,
    hangups: Mutex<usize>,
    /// What `GET /v1/models` lists; `None`: [`MODEL_NAME`] alone.
    models: Mutex<Option<Vec<String>>>,
    /// Signalled on every recorded request and every hang-up.
    changed: Notify,
    /// Set by [`ModelServer::discard_bodies`]: bodies are read and dropped.
    discard_bodies: std::sync::atomic::AtomicBool,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panicking connection task must not take every later assertion down.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The running server; stops (and drops its connections) when dropped.
pub struct ModelServer {
    addr: SocketAddr,
    state: Arc<State>,
    accept_task: tokio::task::JoinHandle<()>,
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        self.accept_task.abort();
    }
}

impl ModelServer {
    /// Binds `127.0.0.1:0` and starts serving.
    pub async fn start() -> ModelServer {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the model server's port");
        let addr = listener.local_addr().expect("model server address");
        let state = Arc::new(State::default());
        let accept_task = tokio::spawn(http::accept_loop(listener, state.clone()));
        ModelServer {
            addr,
            state,
            accept_task,
        }
    }

    /// `http://127.0.0.1:PORT/v1`, what `[model] base_url` should be.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// A model configuration pointing at this server. `api_key_env` names a
    /// variable nobody sets, so no key is sent unless a test sets one.
    pub fn model_config(&self, provider: ProviderKind) -> ModelConfig {
        ModelConfig {
            provider,
            base_url: self.base_url(),
            name: MODEL_NAME.to_string(),
            api_key_env: "TANDEM_TEST_NO_SUCH_KEY".to_string(),
            ..ModelConfig::default()
        }
    }

    /// A session `config` (as `tandem/newSession` takes it) pointing at this
    /// server, with retries a few milliseconds apart so tests of failures
    /// run fast.
    pub fn session_config(&self) -> Value {
        self.session_config_with(json!({}))
    }

    /// [`ModelServer::session_config`] with more `limits` (same keys win).
    pub fn session_config_with(&self, limits: Value) -> Value {
        let mut config = json!({
            "model": {"base_url": self.base_url(), "name": MODEL_NAME, "api_key_env": "TANDEM_TEST_NO_KEY"},
            "limits": {"retry_base_delay_ms": 1, "retry_max_delay_ms": 5},
        });
        if let (Some(all), Value::Object(extra)) = (config["limits"].as_object_mut(), limits) {
            all.extend(extra);
        }
        config
    }

    /// Scripts the next response (FIFO).
    pub fn push(&self, reply: Reply) {
        lock(&self.state.replies).push_back(reply);
    }

    /// Answers every request that finds the FIFO queue empty with
    /// `responder(request)`: for many sessions or turns at once, where the
    /// reply depends on which one asks.
    pub fn respond_with(
        &self,
        responder: impl Fn(&RecordedRequest) -> Reply + Send + Sync + 'static,
    ) {
        *lock(&self.state.responder) = Some(Arc::new(responder));
    }

    /// Sets the model ids `GET /v1/models` lists.
    pub fn set_models(&self, ids: &[&str]) {
        *lock(&self.state.models) = Some(ids.iter().map(|id| id.to_string()).collect());
    }

    /// Reads request bodies to their end and drops them: requests are still
    /// recorded, with `body` `Null` and `raw_body` empty. For a benchmark
    /// whose model answers a long session's steps as fast as they come:
    /// parsing and keeping every multi-hundred-kilobyte body is CPU and
    /// memory a real model server spends on another machine, not on the
    /// cores the daemon under measurement runs on.
    pub fn discard_bodies(&self) {
        self.state
            .discard_bodies
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// How many requests have arrived, without copying them.
    pub fn request_count(&self) -> usize {
        lock(&self.state.requests).len()
    }

    /// Every request received so far, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.state.requests).clone()
    }

    /// Waits until at least `n` requests have arrived and returns them all.
    pub async fn wait_for_requests(&self, n: usize) -> Vec<RecordedRequest> {
        self.wait_until(
            |state| lock(&state.requests).len() >= n,
            || format!("{n} requests to the model server"),
        )
        .await;
        self.requests()
    }

    /// Waits until clients have gone away from `n` stalled or hung replies:
    /// proof that a consumer that stopped reading also closed the socket.
    pub async fn wait_for_hangups(&self, n: usize) {
        self.wait_until(
            |state| *lock(&state.hangups) >= n,
            || format!("{n} clients to hang up on a stalled reply"),
        )
        .await;
    }

    /// When each SSE event was about to be written to a socket, across all
    /// replies, in order.
    pub fn chunk_write_times(&self) -> Vec<Instant> {
        lock(&self.state.chunk_write_times).clone()
    }

    async fn wait_until(&self, done: impl Fn(&State) -> bool, what: impl Fn() -> String) {
        let wait = async {
            loop {
                let changed = self.state.changed.notified();
                tokio::pin!(changed);
                // Register before checking, so a change in between is not lost.
                changed.as_mut().enable();
                if done(&self.state) {
                    return;
                }
                changed.await;
            }
        };
        within_real_time(WAIT_LIMIT, wait, what).await
    }
}

/// Runs `future`, failing the test if it takes longer than `limit` of wall
/// clock time. Unlike `tokio::time::timeout` this holds under paused tokio
/// time, which would otherwise jump straight past the limit while the
/// runtime waits for socket I/O.
pub async fn within_real_time<F: std::future::Future>(
    limit: Duration,
    future: F,
    what: impl Fn() -> String,
) -> F::Output {
    let (expired_tx, expired) = tokio::sync::oneshot::channel::<()>();
    std::thread::spawn(move || {
        std::thread::sleep(limit);
        let _ = expired_tx.send(());
    });
    tokio::select! {
        output = future => output,
        _ = expired => panic!("gave up after {limit:?} waiting for {}", what()),
    }
}

/// A base URL on which nothing listens: a port bound and released again.
pub fn unused_base_url() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a probe port");
    let addr = listener.local_addr().expect("probe address");
    drop(listener);
    format!("http://{addr}/v1")
}

/// `text` cut near its middle, on a character boundary.
fn split_in_two(text: &str) -> (&str, &str) {
    let mid = (1..=text.len() / 2)
        .rev()
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(0);
    text.split_at(mid)
}
