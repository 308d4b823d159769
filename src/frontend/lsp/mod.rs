//! The LSP frontend: tower-lsp behind tandem's own frame reader.

pub mod framing;
