//! The serve's control connection: jsonrpsee's WebSocket at
//! `ws://127.0.0.1:<port>/`, behind the same token, Origin and connection
//! checks as the editors' tunnels, with `serve/status` and `serve/stop`.

use jsonrpsee::client_transport::ws::{
    EitherStream, HeaderMap, HeaderValue, Receiver, Sender, Url, WsHandshakeError,
    WsTransportClientBuilder,
};
use jsonrpsee::core::client::{ReceivedMessage, TransportReceiverT, TransportSenderT};
use serde_json::{json, Value};
use tokio_util::compat::Compat;

use super::Serve;
use crate::support::client::WAIT;

pub type WsSender = Sender<Compat<EitherStream>>;
pub type WsReceiver = Receiver<Compat<EitherStream>>;

/// Opens the control WebSocket with these handshake headers.
pub async fn handshake(
    port: u16,
    headers: &[(&str, &str)],
) -> Result<(WsSender, WsReceiver), WsHandshakeError> {
    let mut map = HeaderMap::new();
    for (name, value) in headers {
        map.append(
            http::HeaderName::from_bytes(name.as_bytes()).expect("header name"),
            HeaderValue::from_str(value).expect("header value"),
        );
    }
    let url = Url::parse(&format!("ws://127.0.0.1:{port}/")).expect("url");
    WsTransportClientBuilder::default()
        .set_headers(map)
        .build(url)
        .await
}

/// The status a refused handshake got; `None` when it was let in.
pub fn refused_with(result: Result<impl Sized, WsHandshakeError>) -> Option<u16> {
    match result {
        Err(WsHandshakeError::Rejected { status_code, .. }) => Some(status_code),
        Err(other) => panic!("expected a refused handshake, got {other}"),
        Ok(_) => None,
    }
}

/// A control connection with the token.
pub struct Control {
    tx: WsSender,
    rx: WsReceiver,
    next_id: i64,
}

impl Control {
    pub async fn connect(serve: &Serve) -> Control {
        let bearer = format!("Bearer {}", serve.token());
        let (tx, rx) = handshake(serve.port(), &[("authorization", &bearer)])
            .await
            .unwrap_or_else(|e| panic!("control handshake: {e}; stderr:\n{}", serve.stderr()));
        Control { tx, rx, next_id: 1 }
    }

    /// Sends one message as text.
    pub async fn send(&mut self, message: &Value) {
        self.tx
            .send(message.to_string())
            .await
            .expect("send to the serve");
    }

    /// The next message the serve sends.
    pub async fn next_message(&mut self) -> Value {
        loop {
            let message = tokio::time::timeout(WAIT, self.rx.receive())
                .await
                .expect("a message in time")
                .expect("the control connection is open");
            let text = match message {
                ReceivedMessage::Text(text) => text,
                ReceivedMessage::Bytes(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
                ReceivedMessage::Pong => continue,
            };
            return serde_json::from_str(&text).expect("the serve sent JSON");
        }
    }

    /// The next message with `id`.
    pub async fn response(&mut self, id: &Value) -> Value {
        loop {
            let message = self.next_message().await;
            if &message["id"] == id {
                return message;
            }
        }
    }

    pub async fn request(&mut self, method: &str, params: Value) -> Value {
        let id = json!(self.next_id);
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        self.response(&id).await
    }

    /// `serve/status`'s `clients`: the editor connections open now.
    pub async fn clients(&mut self) -> u64 {
        let status = self.request("serve/status", Value::Null).await;
        status["result"]["clients"]
            .as_u64()
            .unwrap_or_else(|| panic!("serve/status: {status}"))
    }

    pub async fn close(mut self) {
        let _ = self.tx.close().await;
    }
}
