//! `$/cancelRequest` on a request that a turn answers (`tandem/prompt`,
//! `tandem/runTask`).
//!
//! tower-lsp answers a cancelled request itself, with `-32800`, the moment
//! it drops the handler, so the turn's last updates (through `turn_end`)
//! would follow the answer. Instead, the stdin loop keeps a token per such
//! request, tags the request's params with its key, and on
//! `$/cancelRequest` fires the token rather than telling tower-lsp; the
//! handler then withdraws its prompt and answers when the turn has ended,
//! with `stopReason: "cancelled"`, like `tandem/cancel`.
//!
//! **Invariant:** a tracked request's answer is written after every update
//! of its turn; a token lives until the request's response passes the
//! forwarder.

use std::collections::HashMap;
use std::sync::Mutex;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// The params field that carries a tracked request's key to its handler.
pub(crate) const REQUEST_KEY_FIELD: &str = "$requestId";

/// Methods whose answer waits for a turn to end.
const TURN_ANSWERED: [&str; 2] = ["tandem/prompt", "tandem/runTask"];

#[derive(Default)]
pub struct RequestCancels {
    tokens: Mutex<HashMap<String, CancellationToken>>,
}

impl RequestCancels {
    /// Starts tracking `message` if it is a request a turn answers, tagging
    /// its params with the key; returns whether the message changed.
    pub(crate) fn track(&self, message: &mut Value) -> bool {
        let method = message.get("method").and_then(Value::as_str);
        if !method.is_some_and(|m| TURN_ANSWERED.contains(&m)) {
            return false;
        }
        let Some(key) = message.get("id").map(key_of) else {
            return false;
        };
        let Some(params) = message.get_mut("params").and_then(Value::as_object_mut) else {
            return false;
        };
        params.insert(REQUEST_KEY_FIELD.to_string(), Value::String(key.clone()));
        self.lock().insert(key, CancellationToken::new());
        true
    }

    /// The token of a tracked request, for its handler.
    pub(crate) fn token(&self, key: &str) -> Option<CancellationToken> {
        self.lock().get(key).cloned()
    }

    /// Fires the token of the request that `$/cancelRequest` names; false
    /// when that request is not tracked (tower-lsp handles it then).
    pub(crate) fn cancel(&self, cancel_request: &Value) -> bool {
        let Some(id) = cancel_request.get("params").and_then(|p| p.get("id")) else {
            return false;
        };
        match self.lock().get(&key_of(id)) {
            Some(token) => {
                token.cancel();
                true
            }
            None => false,
        }
    }

    /// Forgets the request that `response` answers.
    pub(crate) fn answered(&self, response: &Value) {
        if response.get("method").is_none() {
            if let Some(id) = response.get("id") {
                self.lock().remove(&key_of(id));
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, CancellationToken>> {
        self.tokens.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// One key for a JSON-RPC id, whether it came as a number or a string.
fn key_of(id: &Value) -> String {
    id.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_prompt_is_tagged_and_its_cancel_fires_its_token_until_answered() {
        let cancels = RequestCancels::default();
        let mut prompt = json!({"jsonrpc": "2.0", "id": 7, "method": "tandem/prompt",
            "params": {"sessionId": "s", "prompt": []}});
        assert!(cancels.track(&mut prompt));
        let key = prompt["params"][REQUEST_KEY_FIELD]
            .as_str()
            .unwrap()
            .to_string();
        let token = cancels.token(&key).unwrap();

        assert!(!cancels.cancel(&json!({"method": "$/cancelRequest", "params": {"id": 8}})));
        assert!(!token.is_cancelled());
        assert!(cancels.cancel(&json!({"method": "$/cancelRequest", "params": {"id": 7}})));
        assert!(token.is_cancelled());

        cancels.answered(&json!({"jsonrpc": "2.0", "id": 7, "result": {}}));
        assert!(cancels.token(&key).is_none());
        assert!(!cancels.cancel(&json!({"method": "$/cancelRequest", "params": {"id": 7}})));
    }

    #[test]
    fn other_requests_and_notifications_are_not_tracked() {
        let cancels = RequestCancels::default();
        let mut steer = json!({"id": 1, "method": "tandem/steer", "params": {}});
        let mut notification = json!({"method": "tandem/prompt", "params": {}});
        assert!(!cancels.track(&mut steer));
        assert!(!cancels.track(&mut notification));
        assert!(steer["params"].get(REQUEST_KEY_FIELD).is_none());
    }
}
