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
    WireDiagnostic, WireLspLocation, WirePosition, WireRange, WorkspaceSymbolsParams,
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

fn location(l: WireLspLocation) -> Option<Location> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_protocol_md_examples_parse_into_the_core_values() {
        let result: DiagnosticsResult = serde_json::from_str(
            r#"{"files":[{"uri":"file:///home/me/project/app.py","version":7,"diagnostics":[
              {"range":{"start":{"line":1,"character":6},"end":{"line":1,"character":7}},"severity":1,
               "message":"\"y\" is not defined","source":"Pyright","code":"reportUndefinedVariable"},
              {"range":{"start":{"line":0,"character":0},"end":{"line":0,"character":1}},
               "message":"no severity","code":2304,"tags":[1]}]},
              {"uri":"untitled:Untitled-1","version":1,"diagnostics":[]}]}"#,
        )
        .unwrap();
        let files: Vec<FileDiagnostics> = result
            .files
            .into_iter()
            .filter_map(file_diagnostics)
            .collect();
        assert_eq!(files.len(), 1, "a URI that is not a file is dropped");
        assert_eq!(files[0].path, PathBuf::from("/home/me/project/app.py"));
        assert_eq!(files[0].version, Some(7));
        let [first, second] = &files[0].diagnostics[..] else {
            panic!("{files:?}")
        };
        assert_eq!(first.severity, Some(Severity::Error));
        assert_eq!(first.code.as_deref(), Some("reportUndefinedVariable"));
        assert_eq!(second.severity, None);
        assert!(second.is_error(), "LSP reads no severity as an error");
        assert_eq!(second.code.as_deref(), Some("2304"));

        let symbols: WorkspaceSymbolsResult = serde_json::from_str(
            r#"{"symbols":[{"name":"greet","kind":12,
              "location":{"uri":"file:///home/me/project/lib.py","range":{"start":{"line":0,"character":4},"end":{"line":0,"character":9}}}}]}"#,
        )
        .unwrap();
        assert_eq!(symbol_kind_name(symbols.symbols[0].kind), "function");
        let empty: LocationsResult = serde_json::from_str(
            r#"{"locations":[],"reason":"no language server that answers textDocument/definition is attached to notes.txt"}"#,
        )
        .unwrap();
        assert!(locations(empty).reason.is_some());
    }

    #[test]
    fn a_point_goes_out_as_uri_and_position() {
        let at = TextPoint {
            path: PathBuf::from("/w/a b.py"),
            position: TextPosition {
                line: 3,
                character: 17,
            },
        };
        assert_eq!(
            serde_json::to_value(at_params(&at, Some(false))).unwrap(),
            serde_json::json!({"uri": "file:///w/a%20b.py", "position": {"line": 3, "character": 17},
                               "includeDeclaration": false})
        );
        assert_eq!(
            serde_json::to_value(at_params(&at, None)).unwrap(),
            serde_json::json!({"uri": "file:///w/a%20b.py", "position": {"line": 3, "character": 17}})
        );
    }
}
