//! The per-connection RPC middleware: it knows when a connection comes and
//! goes, hands JSON-RPC notifications to the registered methods, and
//! answers `$/cancelRequest`.
//!
//! jsonrpsee answers a notification for a registered method by dropping it;
//! tandem's wire has notifications that must act (`tandem/cancel`,
//! `textDocument/didChange`, ...), so each is called as its method and the
//! answer thrown away.
//!
//! `$/cancelRequest {id}` names a request of the same connection still being
//! handled. A `tandem/prompt` finds a [`RequestCancel`] token in its
//! (or `tandem/runTask`) extensions and withdraws its prompt when it fires, answering with its
//! receipt after the turn's last update (as over stdio); any other request
//! is dropped and answered `-32800`.
//!
//! Invariant: when the last handle of a connection's middleware goes (the
//! connection closed and its calls ended), the hub forgets the connection.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use jsonrpsee::server::middleware::rpc::{Batch, Notification, Request, RpcServiceT};
use jsonrpsee::server::MethodResponse;
use jsonrpsee::types::{ErrorObject, Id};
use jsonrpsee::ConnectionId;
use jsonrpsee::ResponsePayload;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::hub::Hub;

/// Open WebSocket (and HTTP) connections, for the idle timer.
#[derive(Default)]
pub struct ConnectionCount(AtomicUsize);

impl ConnectionCount {
    pub fn get(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

/// Fired by `$/cancelRequest` for the request whose extensions hold it.
#[derive(Clone)]
pub struct RequestCancel(pub CancellationToken);

/// Methods that answer a cancel themselves, with their turn's receipt.
const TURN_ANSWERED: [&str; 2] = ["tandem/prompt", "tandem/runTask"];

struct Guard {
    hub: Arc<Hub>,
    count: Arc<ConnectionCount>,
    conn: OnceLock<usize>,
    /// The connection's requests being handled, by id (as JSON text).
    running: Mutex<Running>,
}

/// A connection's requests in flight, and cancels that arrived first.
#[derive(Default)]
struct Running {
    tokens: HashMap<String, CancellationToken>,
    /// jsonrpsee handles each message on its own task, so a cancel sent
    /// right after its request may be handled first: the request then
    /// starts cancelled. The last few such ids are kept.
    early: VecDeque<String>,
}

const EARLY_CANCELS_KEPT: usize = 32;

impl Guard {
    fn running(&self) -> std::sync::MutexGuard<'_, Running> {
        self.running.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Running {
    /// Fires the token of request `key`, or remembers the cancel.
    fn cancel(&mut self, key: String) {
        match self.tokens.get(&key) {
            Some(token) => token.cancel(),
            None => {
                if self.early.len() == EARLY_CANCELS_KEPT {
                    self.early.pop_front();
                }
                self.early.push_back(key);
            }
        }
    }

    /// Tracks request `key`; its token is already fired if its cancel came
    /// first.
    fn start(&mut self, key: &str) -> CancellationToken {
        let token = CancellationToken::new();
        if let Some(at) = self.early.iter().position(|k| k == key) {
            self.early.remove(at);
            token.cancel();
        }
        self.tokens.insert(key.to_string(), token.clone());
        token
    }
}

/// Forgets a request once its handling ends (however it ends).
struct Tracked {
    guard: Arc<Guard>,
    key: String,
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.guard.running().tokens.remove(&self.key);
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.count.0.fetch_sub(1, Ordering::SeqCst);
        if let Some(conn) = self.conn.get() {
            tracing::info!(conn, "client disconnected");
            self.hub.disconnected(*conn);
        }
    }
}

#[derive(Clone)]
pub struct PerConnection<S> {
    inner: S,
    guard: Arc<Guard>,
}

impl<S> PerConnection<S> {
    /// Wraps a new connection's service.
    pub fn new(inner: S, hub: Arc<Hub>, count: Arc<ConnectionCount>) -> Self {
        count.0.fetch_add(1, Ordering::SeqCst);
        PerConnection {
            inner,
            guard: Arc::new(Guard {
                hub,
                count,
                conn: OnceLock::new(),
                running: Mutex::new(Running::default()),
            }),
        }
    }

    fn note(&self, extensions: &jsonrpsee::Extensions) {
        if let Some(ConnectionId(conn)) = extensions.get::<ConnectionId>().copied() {
            if self.guard.conn.set(conn).is_ok() {
                tracing::info!(conn, "client connected");
                self.guard.hub.client(conn);
            }
        }
    }
}

impl<S> RpcServiceT for PerConnection<S>
where
    S: RpcServiceT<
            MethodResponse = MethodResponse,
            NotificationResponse = MethodResponse,
            BatchResponse = MethodResponse,
        > + Send
        + Sync
        + Clone
        + 'static,
{
    type MethodResponse = MethodResponse;
    type NotificationResponse = MethodResponse;
    type BatchResponse = MethodResponse;

    fn call<'a>(&self, request: Request<'a>) -> impl Future<Output = MethodResponse> + Send + 'a {
        self.note(&request.extensions);
        self.handle(request)
    }

    fn batch<'a>(&self, batch: Batch<'a>) -> impl Future<Output = MethodResponse> + Send + 'a {
        let inner = self.inner.clone();
        async move { inner.batch(batch).await }
    }

    fn notification<'a>(
        &self,
        n: Notification<'a>,
    ) -> impl Future<Output = MethodResponse> + Send + 'a {
        self.note(&n.extensions);
        let extensions = n.extensions.clone();
        let mut request = Request::owned(
            n.method.into_owned(),
            n.params.map(|p| p.into_owned()),
            Id::Null,
        );
        request.extensions = extensions.clone();
        let handled = self.handle(request);
        async move {
            let _ = handled.await;
            MethodResponse::notification().with_extensions(extensions)
        }
    }
}

impl<S> PerConnection<S>
where
    S: RpcServiceT<MethodResponse = MethodResponse> + Send + Sync + Clone + 'static,
{
    /// Calls the method, cancellable by `$/cancelRequest` when it has an id.
    fn handle<'a>(
        &self,
        mut request: Request<'a>,
    ) -> impl Future<Output = MethodResponse> + Send + 'a {
        let inner = self.inner.clone();
        let guard = self.guard.clone();
        async move {
            let id = request.id().into_owned();
            if request.method_name() == "$/cancelRequest" {
                let target = request
                    .params()
                    .parse::<Value>()
                    .ok()
                    .and_then(|p| p.get("id").map(Value::to_string));
                if let Some(key) = target {
                    guard.running().cancel(key);
                }
                let extensions = request.extensions().clone();
                return MethodResponse::response(
                    id,
                    ResponsePayload::success(Value::Null),
                    usize::MAX,
                )
                .with_extensions(extensions);
            }
            if id == Id::Null {
                return inner.call(request).await;
            }
            let key = serde_json::to_string(&id).unwrap_or_default();
            let token = guard.running().start(&key);
            let _tracked = Tracked { guard, key };
            if TURN_ANSWERED.contains(&request.method_name()) {
                request.extensions_mut().insert(RequestCancel(token));
                return inner.call(request).await;
            }
            let extensions = request.extensions().clone();
            tokio::select! {
                response = inner.call(request) => response,
                _ = token.cancelled() => MethodResponse::error(
                    id,
                    ErrorObject::owned(-32800, "Canceled", None::<()>),
                )
                .with_extensions(extensions),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cancel_fires_its_running_request_or_waits_for_it_to_arrive() {
        let mut running = Running::default();
        let seven = running.start("7");
        running.cancel("8".into());
        assert!(!seven.is_cancelled());
        running.cancel("7".into());
        assert!(seven.is_cancelled());
        // Handled before its request: the request starts cancelled, once.
        assert!(running.start("8").is_cancelled());
        assert!(!running.start("9").is_cancelled());
        running.tokens.remove("8");
        assert!(!running.start("8").is_cancelled());
    }

    #[test]
    fn only_the_last_early_cancels_are_kept() {
        let mut running = Running::default();
        for i in 0..EARLY_CANCELS_KEPT + 1 {
            running.cancel(i.to_string());
        }
        assert_eq!(running.early.len(), EARLY_CANCELS_KEPT);
        assert!(!running.start("0").is_cancelled());
        assert!(running.start("1").is_cancelled());
    }
}
