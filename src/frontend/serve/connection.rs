//! The per-connection RPC middleware: it knows when a connection comes and
//! goes, and hands JSON-RPC notifications to the registered methods.
//!
//! jsonrpsee answers a notification for a registered method by dropping it;
//! tandem's wire has notifications that must act (`tandem/cancel`,
//! `textDocument/didChange`, ...), so each is called as its method and the
//! answer thrown away.
//!
//! Invariant: when the last handle of a connection's middleware goes (the
//! connection closed and its calls ended), the hub forgets the connection.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use jsonrpsee::server::middleware::rpc::{Batch, Notification, Request, RpcServiceT};
use jsonrpsee::server::MethodResponse;
use jsonrpsee::types::Id;
use jsonrpsee::ConnectionId;

use super::hub::Hub;

/// Open WebSocket (and HTTP) connections, for the idle timer.
#[derive(Default)]
pub struct ConnectionCount(AtomicUsize);

impl ConnectionCount {
    pub fn get(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

struct Guard {
    hub: Arc<Hub>,
    count: Arc<ConnectionCount>,
    conn: OnceLock<usize>,
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
            }),
        }
    }

    fn note(&self, extensions: &jsonrpsee::Extensions) {
        if let Some(ConnectionId(conn)) = extensions.get::<ConnectionId>().copied() {
            if self.guard.conn.set(conn).is_ok() {
                tracing::info!(conn, "client connected");
                self.guard.hub.clients.connected(conn);
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
        let inner = self.inner.clone();
        async move { inner.call(request).await }
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
        let inner = self.inner.clone();
        let extensions = n.extensions.clone();
        let mut request = Request::owned(
            n.method.into_owned(),
            n.params.map(|p| p.into_owned()),
            Id::Null,
        );
        request.extensions = extensions.clone();
        async move {
            let _ = inner.call(request).await;
            MethodResponse::notification().with_extensions(extensions)
        }
    }
}
