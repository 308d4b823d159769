//! `$/cancelRequest` on a request that a turn answers (`tandem/prompt`,
//! `tandem/runTask`).
//!
//! tower-lsp answers a cancelled request itself, with `-32800`, the moment
//! it drops the handler, so the turn's last updates (through `turn_end`)
//! would follow the answer. Instead, the input loop keeps a token per such
//! request and runs the request's future with that token in
//! [`TURN_REQUEST`]; on `$/cancelRequest` it fires the token rather than
//! telling tower-lsp, and the handler then withdraws its prompt and
//! answers when the turn has ended, with `stopReason: "cancelled"`, like
//! `tandem/cancel`. (The token travels beside the request rather than in
//! its params: tower-lsp hands a handler only the params, and writing a
//! key into them would put a field on the wire types that no editor may
//! send.)
//!
//! **Invariant:** a tracked request's answer is written after every update
//! of its turn; a token lives until the request's response is queued.

use std::collections::HashMap;

use parking_lot::Mutex;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// Methods whose answer waits for a turn to end.
pub(super) const TURN_ANSWERED: [&str; 2] = ["tandem/prompt", "tandem/runTask"];

tokio::task_local! {
    /// The cancel token of the request whose future is running, when it
    /// is a tracked one.
    pub(super) static TURN_REQUEST: Option<CancellationToken>;
}

/// The token of the request being handled, for its handler.
pub(super) fn current_token() -> Option<CancellationToken> {
    TURN_REQUEST.try_with(Clone::clone).ok().flatten()
}

#[derive(Default)]
pub struct RequestCancels {
    tokens: Mutex<HashMap<String, CancellationToken>>,
}

impl RequestCancels {
    /// Starts tracking the request with `id`; returns its key and token.
    /// `None` when a request with that id is already tracked: tower-lsp
    /// refuses the second (`-32600`), and it must not take the first's
    /// token with it when it is answered.
    pub(crate) fn track(&self, id: &Value) -> Option<(String, CancellationToken)> {
        let key = key_of(id);
        let mut tokens = self.tokens.lock();
        if tokens.contains_key(&key) {
            return None;
        }
        let token = CancellationToken::new();
        tokens.insert(key.clone(), token.clone());
        Some((key, token))
    }

    /// Fires the token of the request that `$/cancelRequest`'s params
    /// name; false when that request is not tracked (tower-lsp handles it
    /// then).
    pub(crate) fn cancel(&self, params: Option<&Value>) -> bool {
        let Some(id) = params.and_then(|p| p.get("id")) else {
            return false;
        };
        match self.tokens.lock().get(&key_of(id)) {
            Some(token) => {
                token.cancel();
                true
            }
            None => false,
        }
    }

    /// Forgets the tracked request `key` (its response is being queued).
    pub(crate) fn answered(&self, key: &str) {
        self.tokens.lock().remove(key);
    }
}

/// One key for a JSON-RPC id: `7` and `"7"` stay apart.
fn key_of(id: &Value) -> String {
    id.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_cancel_fires_the_token_of_its_request_until_answered() {
        let cancels = RequestCancels::default();
        let (key, token) = cancels.track(&json!(7)).unwrap();

        assert!(!cancels.cancel(Some(&json!({"id": 8}))));
        assert!(!cancels.cancel(Some(&json!({"id": "7"}))));
        assert!(!cancels.cancel(None));
        assert!(!token.is_cancelled());
        assert!(cancels.cancel(Some(&json!({"id": 7}))));
        assert!(token.is_cancelled());

        cancels.answered(&key);
        assert!(!cancels.cancel(Some(&json!({"id": 7}))));
    }

    #[test]
    fn a_second_request_with_a_tracked_id_is_not_tracked() {
        let cancels = RequestCancels::default();
        let (_, first) = cancels.track(&json!("a")).unwrap();
        assert!(cancels.track(&json!("a")).is_none());
        assert!(cancels.cancel(Some(&json!({"id": "a"}))));
        assert!(first.is_cancelled());
    }

    #[tokio::test]
    async fn the_handler_sees_the_token_its_request_runs_with() {
        let token = CancellationToken::new();
        let seen = TURN_REQUEST
            .scope(Some(token.clone()), async { current_token() })
            .await;
        token.cancel();
        assert!(seen.unwrap().is_cancelled());
        assert!(current_token().is_none());
    }
}
