//! The editor's document notifications (`textDocument/didOpen`,
//! `didChange`, `didClose`, `didSave`), applied to the buffer cache by the
//! input loop itself, in wire order.
//!
//! Invariant: a document notification is applied before anything that
//! follows it on the wire is looked at. tower-lsp runs its handlers as
//! concurrent futures, and an answer to one of our requests (a question, a
//! permission) never goes through it: forwarded there, a `didChange` could
//! land after the answer behind it had already resumed a turn, which would
//! then read (and compute an edit against) the text before the change.

use serde::de::DeserializeOwned;
use serde_json::Value;
use tower_lsp::lsp_types::{
    DidChangeTextDocumentParams, DidCloseTextDocumentParams, DidOpenTextDocumentParams,
    DidSaveTextDocumentParams,
};

use super::server::{text_change, uri_path};
use super::OutboundQueue;
use crate::buffers::BufferCache;

/// The notifications this module applies.
const METHODS: [&str; 4] = [
    "textDocument/didOpen",
    "textDocument/didChange",
    "textDocument/didClose",
    "textDocument/didSave",
];

/// Whether `method` sent without an id is one of ours to apply (sent with
/// an id, it is a request under a notification's name, which tower-lsp
/// answers).
pub fn is_document_notification(method: &str) -> bool {
    METHODS.contains(&method)
}

/// Applies a document notification to `buffers`; bad params are logged
/// (a notification has no answer to carry them). A close asks `out`'s
/// writer for a trim.
pub fn apply(buffers: &BufferCache, method: &str, params: Option<Value>, out: &OutboundQueue) {
    let params = params.unwrap_or(Value::Null);
    match method {
        "textDocument/didOpen" => {
            if let Some(p) = parse::<DidOpenTextDocumentParams>(method, params) {
                let doc = p.text_document;
                match uri_path(&doc.uri) {
                    Some(path) => buffers.open(path, doc.version, &doc.text),
                    None => {
                        tracing::debug!(uri = %doc.uri, "ignoring a document that is not a file")
                    }
                }
            }
        }
        "textDocument/didChange" => {
            if let Some(p) = parse::<DidChangeTextDocumentParams>(method, params) {
                let Some(path) = uri_path(&p.text_document.uri) else {
                    return;
                };
                let changes: Vec<_> = p.content_changes.into_iter().map(text_change).collect();
                if let Err(e) = buffers.change(&path, p.text_document.version, &changes) {
                    // The editor and the cache disagree now; the agent would
                    // read a stale buffer, so say so loudly.
                    tracing::error!(uri = %p.text_document.uri, "didChange not applied: {e}");
                }
            }
        }
        "textDocument/didClose" => {
            if let Some(p) = parse::<DidCloseTextDocumentParams>(method, params) {
                if let Some(path) = uri_path(&p.text_document.uri) {
                    buffers.close(&path);
                    // A closed buffer's text is free now; give it back
                    // once idle (many closes, one trim).
                    out.trim_when_idle();
                }
            }
        }
        "textDocument/didSave" => {
            if let Some(p) = parse::<DidSaveTextDocumentParams>(method, params) {
                if let Some(path) = uri_path(&p.text_document.uri) {
                    buffers.saved(&path, p.text.as_deref());
                }
            }
        }
        _ => {}
    }
}

/// A notification has no answer to carry a parse error: it is logged.
fn parse<T: DeserializeOwned>(method: &str, params: Value) -> Option<T> {
    serde_json::from_value(params)
        .map_err(|e| tracing::warn!("{method} with bad params ignored: {e}"))
        .ok()
}
