//! Work-done progress (`$/progress`) for the clients following a session:
//! the LSP frontend's [`Progress`], one per subscriber whose client declared
//! `window.workDoneProgress`, its messages sent through the subscription.
//!
//! Its `window/workDoneProgress/create` requests have ids of their own
//! (`tandem-progress-N`), so a client's answer to one is never taken for an
//! answer to the session's permission requests (`tandem-N`).
//!
//! Invariant: as over stdio, a token's notifications go out in order and
//! only once that client accepted the token; a client hears progress only
//! of turns that start while it is attached.

use std::sync::{Arc, Weak};

use serde_json::Value;

use super::hub::Subscriber;
use crate::frontend::lsp::outgoing::Outgoing;
use crate::frontend::lsp::progress::{Progress, TitleSource};
use crate::frontend::lsp::{Outbound, OutboundQueue};

/// The prefix of progress-token requests' ids.
pub const ID_PREFIX: &str = "tandem-progress-";

/// A subscriber's progress: the reporter and the requests it makes.
pub struct SubscriberProgress {
    pub progress: Arc<Progress>,
    pub outgoing: Arc<Outgoing>,
}

/// Makes `sub`'s progress reporter; what it writes goes out through `sub`.
pub fn for_subscriber(sub: &Arc<Subscriber>, titles: TitleSource) -> SubscriberProgress {
    let (out, out_rx) = OutboundQueue::channel();
    let (requests, requests_rx) = OutboundQueue::channel();
    let outgoing = Outgoing::with_id_prefix(requests, ID_PREFIX);
    let progress = Progress::new(out, outgoing.clone());
    progress.set_title_source(titles);
    progress.set_enabled(true);
    tokio::spawn(drain(out_rx, Arc::downgrade(sub)));
    tokio::spawn(drain(requests_rx, Arc::downgrade(sub)));
    SubscriberProgress { progress, outgoing }
}

/// Sends a queue's messages on through the subscriber while it lives.
async fn drain(mut rx: tokio::sync::mpsc::UnboundedReceiver<Outbound>, sub: Weak<Subscriber>) {
    while let Some(Outbound::Frame(body)) = rx.recv().await {
        let Some(sub) = sub.upgrade() else { return };
        match serde_json::from_slice::<Value>(&body) {
            Ok(message) => sub.send_message(Arc::new(message)),
            Err(e) => tracing::error!("unreadable progress message: {e}"),
        }
    }
}

/// The session and turn of a progress token (`tandem/<session>/<turn>`).
pub fn parse_token(token: &str) -> Option<(&str, &str)> {
    let rest = token.strip_prefix("tandem/")?;
    let (session, turn) = rest.split_once('/')?;
    (!session.is_empty() && !turn.is_empty()).then_some((session, turn))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_name_a_session_and_a_turn() {
        assert_eq!(parse_token("tandem/abc/t3"), Some(("abc", "t3")));
        assert_eq!(parse_token("tandem/abc"), None);
        assert_eq!(parse_token("other/abc/t3"), None);
        assert_eq!(parse_token("tandem//t3"), None);
    }
}
