//! The wire shapes of the editor's language servers (`tandem/diagnostics`,
//! `tandem/definition`, `tandem/references`, `tandem/workspaceSymbols`,
//! `tandem/diagnosticsChanged`).

use serde::{Deserialize, Serialize};

use super::{WireDiagnostic, WirePosition, WireRange};

/// `tandem/diagnostics` params (daemon → editor).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DiagnosticsParams {
    /// These files; absent: every file the editor has diagnostics for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uris: Option<Vec<String>>,
}

/// The diagnostics of one file (in `tandem/diagnostics` results and
/// `tandem/diagnosticsChanged`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileDiagnosticsParams {
    pub uri: String,
    /// The document version they are for; `null` for a file not open.
    #[serde(default)]
    pub version: Option<i32>,
    pub diagnostics: Vec<WireDiagnostic>,
}

/// `tandem/diagnostics` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DiagnosticsResult {
    #[serde(default)]
    pub files: Vec<FileDiagnosticsParams>,
    /// Why the answer is empty or partial, when the editor knows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// `tandem/definition` and `tandem/references` params (daemon → editor).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SymbolAtParams {
    pub uri: String,
    pub position: WirePosition,
    /// `tandem/references` only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_declaration: Option<bool>,
}

/// LSP `Location`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WireLspLocation {
    pub uri: String,
    pub range: WireRange,
}

/// `tandem/definition` and `tandem/references` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LocationsResult {
    #[serde(default)]
    pub locations: Vec<WireLspLocation>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// `tandem/workspaceSymbols` params (daemon → editor).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkspaceSymbolsParams {
    pub query: String,
}

/// One symbol of a `tandem/workspaceSymbols` result (LSP
/// `SymbolInformation`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WireSymbol {
    pub name: String,
    /// LSP `SymbolKind` (1 = file … 26 = type parameter).
    pub kind: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_name: Option<String>,
    pub location: WireLspLocation,
}

/// `tandem/workspaceSymbols` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceSymbolsResult {
    #[serde(default)]
    pub symbols: Vec<WireSymbol>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// `tandem/forkSession` params: the session, and the user message the fork
/// starts before (the whole session when absent).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ForkSessionParams {
    pub session_id: String,
    #[serde(default)]
    pub message_id: Option<String>,
    /// More workspace roots after the original's (URIs or absolute
    /// paths), as ACP's `additionalDirectories`; kept in the fork's log.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub additional_directories: Vec<String>,
}

/// `tandem/forkSession` result: the fork, loaded and ready (its history
/// comes with `tandem/loadSession`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ForkSessionResult {
    pub session_id: String,
    /// The approval mode in force in the fork.
    pub mode: String,
}
