//! The editor's language features over the wire: `tandem/diagnostics`,
//! `tandem/definition`, `tandem/references` and `tandem/workspaceSymbols`
//! as requests of ours, and `tandem/diagnosticsChanged` from the editor
//! into the buffer cache's diagnostics. The core's values and the wire's
//! twins (`protocol`) meet here and nowhere else.
//!
//! Invariant: a feature the client did not declare is never asked for; an
//! answer that does not parse is `Unavailable` with the reason, never a
//! failed turn; a URI that is not a `file://` one is dropped.

use std::path::PathBuf;

use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::outgoing::Outgoing;
use crate::buffers::BufferCache;
use crate::protocol::{
    DiagnosticsParams, DiagnosticsResult, FileDiagnosticsParams, LocationsResult, SymbolAtParams,
    WireDiagnostic, WireLocation, WirePosition, WireRange, WorkspaceSymbolsParams,
    WorkspaceSymbolsResult,
};
use crate::vocab::bridge::{BridgeOutcome, ClientBridge};
use crate::vocab::language::{
    symbol_kind_name, Diagnostic, FileDiagnostics, LanguageAnswer, Location, Severity, Symbol,
    TextPoint, TextPosition, TextRange,
};
use crate::workspace::{file_uri, file_uri_to_path};

/// The editor's notification `tandem/diagnosticsChanged`.
pub const DIAGNOSTICS_CHANGED: &str = "tandem/diagnosticsChanged";

/// Records a `tandem/diagnosticsChanged` in `buffers`; bad params are
/// logged (a notification has no answer to carry them).
pub fn diagnostics_changed(buffers: &BufferCache, params: Option<Value>) {
    let params: FileDiagnosticsParams = match serde_json::from_value(params.unwrap_or(Value::Null))
    {
        Ok(params) => params,
        Err(e) => {
            tracing::warn!("{DIAGNOSTICS_CHANGED} with bad params ignored: {e}");
            return;
        }
    };
    match file_diagnostics(params) {
        Some(file) => buffers
            .diagnostics()
            .report(&file.path, file.version, file.diagnostics),
        None => tracing::debug!("{DIAGNOSTICS_CHANGED} for a document that is not a file"),
    }
}

fn position(p: WirePosition) -> TextPosition {
    TextPosition {
        line: p.line,
        character: p.character,
    }
}

fn range(r: WireRange) -> TextRange {
    TextRange {
        start: position(r.start),
        end: position(r.end),
    }
}

fn diagnostic(d: WireDiagnostic) -> Diagnostic {
    Diagnostic {
        range: range(d.range),
        severity: d.severity.and_then(Severity::from_lsp),
        message: d.message,
        source: d.source,
        code: d.code.and_then(|code| match code {
            Value::String(s) => Some(s),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        }),
    }
}

fn file_diagnostics(file: FileDiagnosticsParams) -> Option<FileDiagnostics> {
    Some(FileDiagnostics {
        path: file_uri_to_path(&file.uri)?,
        version: file.version,
        diagnostics: file.diagnostics.into_iter().map(diagnostic).collect(),
    })
}

fn location(l: WireLocation) -> Option<Location> {
    Some(Location {
        path: file_uri_to_path(&l.uri)?,
        range: range(l.range),
    })
}

fn at_params(at: &TextPoint, include_declaration: Option<bool>) -> SymbolAtParams {
    SymbolAtParams {
        uri: file_uri(&at.path),
        position: WirePosition {
            line: at.position.line,
            character: at.position.character,
        },
        include_declaration,
    }
}

impl Outgoing {
    /// Sends one language request the client declared and parses its answer.
    async fn ask<T: DeserializeOwned>(
        &self,
        method: &str,
        offered: bool,
        params: impl serde::Serialize,
        cancel: &CancellationToken,
    ) -> BridgeOutcome<T> {
        if !offered {
            return BridgeOutcome::Unavailable(format!("the editor does not answer {method}"));
        }
        let params = serde_json::to_value(params).unwrap_or(Value::Null);
        match self.request(method, params, cancel).await {
            BridgeOutcome::Answered(result) => match serde_json::from_value(result) {
                Ok(answer) => BridgeOutcome::Answered(answer),
                Err(e) => {
                    BridgeOutcome::Unavailable(format!("the editor's {method} answer is bad: {e}"))
                }
            },
            BridgeOutcome::Cancelled => BridgeOutcome::Cancelled,
            BridgeOutcome::Unavailable(why) => BridgeOutcome::Unavailable(why),
        }
    }

    pub(crate) async fn ask_diagnostics(
        &self,
        paths: Option<Vec<PathBuf>>,
        cancel: &CancellationToken,
    ) -> BridgeOutcome<LanguageAnswer<FileDiagnostics>> {
        let params = DiagnosticsParams {
            uris: paths.map(|paths| paths.iter().map(|p| file_uri(p)).collect()),
        };
        let offered = self.abilities().language.diagnostics;
        let answer: BridgeOutcome<DiagnosticsResult> = self
            .ask("tandem/diagnostics", offered, params, cancel)
            .await;
        map(answer, |r| LanguageAnswer {
            items: r.files.into_iter().filter_map(file_diagnostics).collect(),
            reason: r.reason,
        })
    }

    pub(crate) async fn ask_definition(
        &self,
        at: TextPoint,
        cancel: &CancellationToken,
    ) -> BridgeOutcome<LanguageAnswer<Location>> {
        let offered = self.abilities().language.definition;
        let answer: BridgeOutcome<LocationsResult> = self
            .ask("tandem/definition", offered, at_params(&at, None), cancel)
            .await;
        map(answer, locations)
    }

    pub(crate) async fn ask_references(
        &self,
        at: TextPoint,
        include_declaration: bool,
        cancel: &CancellationToken,
    ) -> BridgeOutcome<LanguageAnswer<Location>> {
        let offered = self.abilities().language.references;
        let params = at_params(&at, Some(include_declaration));
        let answer: BridgeOutcome<LocationsResult> =
            self.ask("tandem/references", offered, params, cancel).await;
        map(answer, locations)
    }

    pub(crate) async fn ask_workspace_symbols(
        &self,
        query: String,
        cancel: &CancellationToken,
    ) -> BridgeOutcome<LanguageAnswer<Symbol>> {
        let offered = self.abilities().language.symbols;
        let params = WorkspaceSymbolsParams { query };
        let answer: BridgeOutcome<WorkspaceSymbolsResult> = self
            .ask("tandem/workspaceSymbols", offered, params, cancel)
            .await;
        map(answer, |r| LanguageAnswer {
            items: r
                .symbols
                .into_iter()
                .filter_map(|s| {
                    Some(Symbol {
                        name: s.name,
                        kind: symbol_kind_name(s.kind).to_string(),
                        container: s.container_name,
                        location: location(s.location)?,
                    })
                })
                .collect(),
            reason: r.reason,
        })
    }
}

fn locations(r: LocationsResult) -> LanguageAnswer<Location> {
    LanguageAnswer {
        items: r.locations.into_iter().filter_map(location).collect(),
        reason: r.reason,
    }
}

fn map<T, U>(outcome: BridgeOutcome<T>, f: impl FnOnce(T) -> U) -> BridgeOutcome<U> {
    match outcome {
        BridgeOutcome::Answered(t) => BridgeOutcome::Answered(f(t)),
        BridgeOutcome::Cancelled => BridgeOutcome::Cancelled,
        BridgeOutcome::Unavailable(why) => BridgeOutcome::Unavailable(why),
    }
}
