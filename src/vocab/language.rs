//! What the editor's language servers know, in core values: diagnostics,
//! locations and symbols, asked for through the
//! [`ClientBridge`](super::bridge::ClientBridge) and pushed by the editor
//! when its diagnostics change.
//!
//! Positions here are the editor's: zero-based, `character` in the
//! negotiated encoding. The buffer layer converts them; nothing here does.

use std::path::PathBuf;

/// The language features a client said it answers
/// (`experimental.tandem.languageFeatures`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LanguageFeatures {
    pub diagnostics: bool,
    pub definition: bool,
    pub references: bool,
    pub symbols: bool,
}

impl LanguageFeatures {
    /// From the names a client lists; names it does not know are ignored
    /// (a newer editor may offer more).
    pub fn from_names<'a>(names: impl IntoIterator<Item = &'a str>) -> Self {
        let mut features = LanguageFeatures::default();
        for name in names {
            match name {
                "diagnostics" => features.diagnostics = true,
                "definition" => features.definition = true,
                "references" => features.references = true,
                "symbols" => features.symbols = true,
                _ => {}
            }
        }
        features
    }
}

/// A zero-based line and character in the negotiated encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct TextPosition {
    pub line: u32,
    pub character: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TextRange {
    pub start: TextPosition,
    pub end: TextPosition,
}

/// LSP's `DiagnosticSeverity`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    Error,
    Warning,
    Information,
    Hint,
}

impl Severity {
    /// From LSP's number (1 = error … 4 = hint).
    pub fn from_lsp(n: u32) -> Option<Severity> {
        Some(match n {
            1 => Severity::Error,
            2 => Severity::Warning,
            3 => Severity::Information,
            4 => Severity::Hint,
            _ => return None,
        })
    }

    pub fn label(&self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Information => "info",
            Severity::Hint => "hint",
        }
    }
}

/// One diagnostic as the editor shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    pub range: TextRange,
    /// `None`: the server did not say (LSP reads that as an error).
    pub severity: Option<Severity>,
    pub message: String,
    pub source: Option<String>,
    /// A number or a string, as text.
    pub code: Option<String>,
}

impl Diagnostic {
    pub fn is_error(&self) -> bool {
        matches!(self.severity, None | Some(Severity::Error))
    }
}

/// The diagnostics of one file, for the document version they are for
/// (`None` when the editor did not say, or the file is not open).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileDiagnostics {
    pub path: PathBuf,
    pub version: Option<i32>,
    pub diagnostics: Vec<Diagnostic>,
}

/// A place in a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    pub path: PathBuf,
    pub range: TextRange,
}

/// A symbol the editor's workspace-symbol providers found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Symbol {
    pub name: String,
    /// LSP's `SymbolKind` in words (`function`, `class`, …).
    pub kind: String,
    pub container: Option<String>,
    pub location: Location,
}

/// A place to ask about: a file and a position in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextPoint {
    /// Absolute, inside the workspace (the tool resolved it).
    pub path: PathBuf,
    pub position: TextPosition,
}

/// What the editor answered, and why it is empty when it could not answer
/// (no language server for the file, no provider, …).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LanguageAnswer<T> {
    pub items: Vec<T>,
    pub reason: Option<String>,
}

/// LSP's `SymbolKind` number in words.
pub fn symbol_kind_name(kind: u32) -> &'static str {
    const NAMES: [&str; 26] = [
        "file",
        "module",
        "namespace",
        "package",
        "class",
        "method",
        "property",
        "field",
        "constructor",
        "enum",
        "interface",
        "function",
        "variable",
        "constant",
        "string",
        "number",
        "boolean",
        "array",
        "object",
        "key",
        "null",
        "enum member",
        "struct",
        "event",
        "operator",
        "type parameter",
    ];
    kind.checked_sub(1)
        .and_then(|i| NAMES.get(i as usize))
        .copied()
        .unwrap_or("symbol")
}
