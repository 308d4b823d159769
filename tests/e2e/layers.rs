//! The layering rule of ARCHITECTURE.md, checked on the source: every
//! `crate::<top>` path and every `super::` that climbs out of a top module
//! is an edge between top modules of `src/`, and no edge may point up the
//! order below. Comments and string literals are not code and are skipped.
//! A failure names the file, the line and the edge.

use std::path::{Path, PathBuf};

/// The layers, bottom first: a top module may use modules of its own rank
/// and below, never above.
const RANKS: &[(&str, u8)] = &[
    ("vocab", 0),
    ("protocol", 0),
    ("config", 1),
    ("buffers", 2),
    ("workspace", 2),
    ("provider", 3),
    ("tools", 4),
    ("mcp", 4),
    ("core", 5),
    ("frontend", 6),
];

/// Edges the ranks would allow but the design does not, with the reason.
const FORBIDDEN: &[(&str, &str, &str)] = &[(
    "core",
    "protocol",
    "the core speaks its own types; only frontends convert them to the wire shapes",
)];

/// The one crate that only the frontends (and the binary) may name.
const FRONTEND_ONLY_CRATE: &str = "tower_lsp";

#[test]
fn no_module_uses_a_module_of_a_higher_layer() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    assert!(!files.is_empty(), "no source files under {}", src.display());

    let mut violations = Vec::new();
    for file in &files {
        let relative = file.strip_prefix(&src).expect("a file under src");
        let text = std::fs::read_to_string(file)
            .unwrap_or_else(|e| panic!("read {}: {e}", file.display()));
        violations.extend(check_file(relative, &text));
    }
    assert!(
        violations.is_empty(),
        "{} layering violation(s); the order (ARCHITECTURE.md) is vocab, protocol < config < \
         buffers, workspace < provider < tools, mcp < core < frontend:\n{}",
        violations.len(),
        violations.join("\n")
    );
}

#[test]
fn the_scanner_sees_paths_in_code_only() {
    let code = r##"
// use crate::frontend::x;
/* crate::frontend */
use crate::{config::Config, frontend::updates};
const S: &str = "crate::frontend";
const R: &str = r#"crate::frontend"#;
const C: char = '"';
fn f<'a>(x: &'a str) { crate::core::run(x) }
mod tests {
    use super::super::tools::Tool;
}
"##;
    let violations = check_file(Path::new("config.rs"), code);
    let lines: Vec<&str> = violations
        .iter()
        .map(|v| v.split_once(": ").map_or(v.as_str(), |(_, edge)| edge))
        .collect();
    assert_eq!(
        lines,
        [
            "config → frontend (rank 1 may not use rank 6)",
            "config → core (rank 1 may not use rank 5)",
            "config → tools (rank 1 may not use rank 4)",
        ],
        "{violations:#?}"
    );
    assert!(
        violations[0].starts_with("src/config.rs:4: "),
        "{violations:#?}"
    );
}

/// `json!` in the core and the tools may build only what the model reads
/// (a tool's JSON schema, `fn parameters`): a message to an editor is a
/// core value there, which a frontend converts to its wire (issue 24's
/// typed edges). Test code is exempt.
#[test]
fn no_json_macro_builds_a_wire_message_under_core_or_tools() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    for dir in ["core", "tools"] {
        rust_files(&src.join(dir), &mut files);
    }
    files.sort();
    assert!(
        files.len() > 10,
        "too few files under src/core and src/tools"
    );
    let mut found = Vec::new();
    for file in &files {
        let relative = file.strip_prefix(&src).expect("a file under src");
        let text = std::fs::read_to_string(file)
            .unwrap_or_else(|e| panic!("read {}: {e}", file.display()));
        found.extend(wire_json_sites(relative, &text));
    }
    assert!(
        found.is_empty(),
        "`json!` builds a message outside a tool's schema under src/core or src/tools; give \
         the core a type and convert it in the frontend:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_json_scanner_allows_schemas_and_tests_only() {
    let code = r##"
fn parameters(&self) -> Value { json!({"type": "object", "x": {"y": 1}}) }
fn propose() -> Value { json!({"documentChanges": []}) } // json! here is code
const S: &str = "json!";
#[cfg(test)]
mod tests { fn t() { json!(1); } }
"##;
    let sites = wire_json_sites(Path::new("tools/x.rs"), code);
    assert_eq!(sites, ["src/tools/x.rs:3"], "{sites:?}");
    assert!(wire_json_sites(Path::new("tools/x/tests.rs"), code).is_empty());
}

/// `src/FILE:LINE` of every `json!` outside a `fn parameters` body and
/// outside test code.
fn wire_json_sites(relative: &Path, text: &str) -> Vec<String> {
    let name = relative.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if name == "tests.rs" || name.ends_with("_tests.rs") {
        return Vec::new();
    }
    let code = code_only(text);
    let code = match code.find("#[cfg(test)]") {
        Some(at) => &code[..at],
        None => &code[..],
    };
    let mut schemas = Vec::new();
    let mut from = 0;
    while let Some(at) = code[from..].find("fn parameters(") {
        let start = from + at;
        let Some(open) = code[start..].find('{').map(|i| start + i) else {
            break;
        };
        let mut depth = 0;
        let mut end = code.len();
        for (i, ch) in code[open..].char_indices() {
            match ch {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = open + i;
                        break;
                    }
                }
                _ => {}
            }
        }
        schemas.push(open..end);
        from = end.max(start + 1);
    }
    code.match_indices("json!")
        .filter(|(at, _)| !schemas.iter().any(|span| span.contains(at)))
        .map(|(at, _)| {
            let line = code[..at].matches('\n').count() + 1;
            format!("src/{}:{line}", relative.display())
        })
        .collect()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries =
        std::fs::read_dir(dir).unwrap_or_else(|e| panic!("read dir {}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn rank(module: &str) -> Option<u8> {
    RANKS.iter().find(|(m, _)| *m == module).map(|(_, r)| *r)
}

/// Every violation in one file (`relative` to `src/`), as
/// `src/FILE:LINE: FROM → TO (why)`.
fn check_file(relative: &Path, text: &str) -> Vec<String> {
    let file_module = module_path(relative);
    let shown = format!("src/{}", relative.display());
    let may_name_frontend_crate =
        relative.starts_with("frontend") || relative == Path::new("main.rs");
    let from = file_module.first().cloned();
    let mut violations = Vec::new();
    if let Some(from) = &from {
        if rank(from).is_none() {
            violations.push(format!(
                "{shown}:1: `{from}` has no layer: add it to RANKS in tests/e2e/layers.rs and to \
                 ARCHITECTURE.md"
            ));
        }
    }
    for (line, target) in references(&file_module, &code_only(text)) {
        if target == FRONTEND_ONLY_CRATE {
            if !may_name_frontend_crate {
                violations.push(format!(
                    "{shown}:{line}: {} → {target} (only src/frontend and src/main.rs may use \
                     {target})",
                    from.as_deref().unwrap_or("crate root")
                ));
            }
            continue;
        }
        let Some(from) = &from else { continue };
        if *from == target {
            continue;
        }
        if let Some((_, _, why)) = FORBIDDEN.iter().find(|(f, t, _)| f == from && *t == target) {
            violations.push(format!(
                "{shown}:{line}: {from} → {target} (forbidden: {why})"
            ));
            continue;
        }
        if let (Some(r_from), Some(r_to)) = (rank(from), rank(&target)) {
            if r_to > r_from {
                violations.push(format!(
                    "{shown}:{line}: {from} → {target} (rank {r_from} may not use rank {r_to})"
                ));
            }
        }
    }
    violations
}

/// The module a file defines: `core/driver.rs` → `[core, driver]`,
/// `core/mod.rs` → `[core]`, `lib.rs` and `main.rs` → `[]` (the root).
fn module_path(relative: &Path) -> Vec<String> {
    let mut path: Vec<String> = relative
        .iter()
        .map(|c| c.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    if path.last().is_some_and(|last| last == "mod") {
        path.pop();
    }
    if path.len() == 1 && (path[0] == "lib" || path[0] == "main") {
        path.clear();
    }
    path
}

/// `text` with comments and the contents of string and char literals
/// replaced by spaces; newlines are kept, so line numbers still hold.
fn code_only(text: &str) -> String {
    let c: Vec<char> = text.chars().collect();
    let is_ident = |ch: char| ch.is_alphanumeric() || ch == '_';
    let at = |i: usize| c.get(i).copied().unwrap_or('\0');
    let blank = |ch: char| if ch == '\n' { '\n' } else { ' ' };
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < c.len() {
        match c[i] {
            '/' if at(i + 1) == '/' => {
                while i < c.len() && c[i] != '\n' {
                    out.push(' ');
                    i += 1;
                }
            }
            '/' if at(i + 1) == '*' => {
                let mut depth = 0;
                loop {
                    if i >= c.len() {
                        break;
                    }
                    if c[i] == '/' && at(i + 1) == '*' {
                        depth += 1;
                        out.push_str("  ");
                        i += 2;
                    } else if c[i] == '*' && at(i + 1) == '/' {
                        depth -= 1;
                        out.push_str("  ");
                        i += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        out.push(blank(c[i]));
                        i += 1;
                    }
                }
            }
            '"' => {
                out.push(' ');
                i += 1;
                while i < c.len() && c[i] != '"' {
                    if c[i] == '\\' {
                        out.push(' ');
                        i += 1;
                    }
                    if i < c.len() {
                        out.push(blank(c[i]));
                        i += 1;
                    }
                }
                out.push(' ');
                i += 1;
            }
            'r' if (i == 0
                || !is_ident(c[i - 1])
                || (c[i - 1] == 'b' && (i < 2 || !is_ident(c[i - 2]))))
                && {
                    let mut j = i + 1;
                    while at(j) == '#' {
                        j += 1;
                    }
                    at(j) == '"'
                } =>
            {
                let mut hashes = 0;
                i += 1;
                out.push(' ');
                while c[i] == '#' {
                    hashes += 1;
                    out.push(' ');
                    i += 1;
                }
                out.push(' ');
                i += 1;
                while i < c.len() {
                    if c[i] == '"' && (1..=hashes).all(|k| at(i + k) == '#') {
                        for _ in 0..=hashes {
                            out.push(' ');
                        }
                        i += hashes + 1;
                        break;
                    }
                    out.push(blank(c[i]));
                    i += 1;
                }
            }
            '\'' if at(i + 1) == '\\' => {
                // An escaped char literal (`'\''`, `'\u{..}'`): blank the
                // quote, the backslash and the escaped char, then up to the
                // closing quote.
                out.push_str("   ");
                i += 3;
                while i < c.len() && c[i] != '\'' {
                    out.push(' ');
                    i += 1;
                }
                out.push(' ');
                i += 1;
            }
            '\'' if at(i + 2) == '\'' => {
                out.push_str("   ");
                i += 3;
            }
            ch => {
                // A lifetime's quote, or any other code.
                out.push(ch);
                i += 1;
            }
        }
    }
    out
}

#[derive(Debug, PartialEq)]
enum Token {
    Ident(String),
    PathSep,
    Open,
    Close,
    Comma,
    Other,
}

fn tokens(code: &str) -> Vec<(usize, Token)> {
    let c: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut line = 1;
    let mut i = 0;
    while i < c.len() {
        let ch = c[i];
        if ch == '\n' {
            line += 1;
            i += 1;
        } else if ch.is_whitespace() {
            i += 1;
        } else if ch.is_alphabetic() || ch == '_' {
            let start = i;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            out.push((line, Token::Ident(c[start..i].iter().collect())));
        } else if ch == ':' && c.get(i + 1) == Some(&':') {
            out.push((line, Token::PathSep));
            i += 2;
        } else {
            out.push((
                line,
                match ch {
                    '{' => Token::Open,
                    '}' => Token::Close,
                    ',' => Token::Comma,
                    _ => Token::Other,
                },
            ));
            i += 1;
        }
    }
    out
}

/// `(line, name)` of every top module (or frontend-only crate) the code
/// names: after `crate::`, after enough `super::`s to leave the top module
/// of `file_module`, and inside a `{...}` group at either place.
fn references(file_module: &[String], code: &str) -> Vec<(usize, String)> {
    let toks = tokens(code);
    let ident = |k: usize| match toks.get(k) {
        Some((_, Token::Ident(name))) => Some(name.as_str()),
        _ => None,
    };
    let is = |k: usize, t: Token| toks.get(k).is_some_and(|(_, tok)| *tok == t);
    let mut found = Vec::new();
    // Inline modules (`mod tests { ... }`) deepen the module path.
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    for k in 0..toks.len() {
        match &toks[k].1 {
            Token::Open => depth += 1,
            Token::Close => {
                depth = depth.saturating_sub(1);
                if inline.last().is_some_and(|(_, d)| *d == depth) {
                    inline.pop();
                }
            }
            Token::Ident(word) if word == "mod" => {
                if let (Some(name), true) = (ident(k + 1), is(k + 2, Token::Open)) {
                    inline.push((name.to_string(), depth));
                }
            }
            Token::Ident(word) if word == FRONTEND_ONLY_CRATE => {
                found.push((toks[k].0, word.clone()));
            }
            Token::Ident(word)
                if (word == "crate" || word == "super")
                    && !is(k.wrapping_sub(1), Token::PathSep) =>
            {
                let mut next = k;
                let at_root = if word == "crate" {
                    next = k + 1;
                    true
                } else {
                    let mut climbs = 0;
                    while ident(next) == Some("super") && is(next + 1, Token::PathSep) {
                        climbs += 1;
                        next += 2;
                    }
                    if climbs == 0 {
                        continue;
                    }
                    next -= 1;
                    climbs >= file_module.len() + inline.len()
                };
                if !at_root || !is(next, Token::PathSep) {
                    continue;
                }
                // `next` is the `::` after `crate` or the last `super`.
                if let Some(name) = ident(next + 1) {
                    found.push((toks[next + 1].0, name.to_string()));
                } else if is(next + 1, Token::Open) {
                    let mut level = 0;
                    let mut expect_item = true;
                    for (line, tok) in &toks[next + 1..] {
                        match tok {
                            Token::Open => {
                                level += 1;
                                expect_item = level == 1;
                            }
                            Token::Close => {
                                level -= 1;
                                if level == 0 {
                                    break;
                                }
                            }
                            Token::Comma => expect_item = level == 1,
                            Token::Ident(name) if expect_item => {
                                if name != "self" {
                                    found.push((*line, name.clone()));
                                }
                                expect_item = false;
                            }
                            _ => expect_item = false,
                        }
                    }
                }
            }
            _ => {}
        }
    }
    found
}
