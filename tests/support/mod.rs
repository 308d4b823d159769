//! Shared by the integration test binaries: include with
//! `#[path = "../support/mod.rs"] mod support;`.
#![allow(dead_code)]

pub mod client;
pub mod model_server;

use std::time::Duration;

use futures::StreamExt;
use tandem::provider::{Completion, ProviderError, ProviderStream, StreamEvent};

/// A guard against a test hanging forever; never a way of waiting.
pub const TEST_DEADLINE: Duration = Duration::from_secs(20);

/// Everything a provider stream yielded, until its end or its first error.
#[derive(Debug)]
pub struct Drained {
    /// The items before the end, `Completed` included.
    pub events: Vec<StreamEvent>,
    pub error: Option<ProviderError>,
}

impl Drained {
    /// The `Completed` item; panics, showing everything, if there is none.
    pub fn completion(&self) -> &Completion {
        self.events
            .iter()
            .find_map(|e| match e {
                StreamEvent::Completed(c) => Some(c),
                _ => None,
            })
            .unwrap_or_else(|| panic!("stream did not complete: {self:#?}"))
    }

    /// The concatenated `TextDelta`s, in order.
    pub fn text_deltas(&self) -> Vec<&str> {
        self.events
            .iter()
            .filter_map(|e| match e {
                StreamEvent::TextDelta(t) => Some(t.as_str()),
                _ => None,
            })
            .collect()
    }

    pub fn thought_deltas(&self) -> Vec<&str> {
        self.events
            .iter()
            .filter_map(|e| match e {
                StreamEvent::ThoughtDelta(t) => Some(t.as_str()),
                _ => None,
            })
            .collect()
    }

    pub fn completed_count(&self) -> usize {
        self.events
            .iter()
            .filter(|e| matches!(e, StreamEvent::Completed(_)))
            .count()
    }
}

/// Reads a provider stream to its end; also checks that nothing follows an
/// error or a `Completed`.
pub async fn drain(mut stream: ProviderStream) -> Drained {
    let read = async {
        let mut events = Vec::new();
        while let Some(item) = stream.next().await {
            match item {
                Ok(event) => {
                    let last = matches!(event, StreamEvent::Completed(_));
                    events.push(event);
                    if last {
                        assert!(stream.next().await.is_none(), "an item followed Completed");
                        return Drained {
                            events,
                            error: None,
                        };
                    }
                }
                Err(error) => {
                    assert!(stream.next().await.is_none(), "an item followed an error");
                    return Drained {
                        events,
                        error: Some(error),
                    };
                }
            }
        }
        Drained {
            events,
            error: None,
        }
    };
    model_server::within_real_time(TEST_DEADLINE, read, || {
        "the provider stream to end".to_string()
    })
    .await
}
