//! ARCHITECTURE.md's code map is the tree, directory by directory: every
//! directory under `src/` and every top module (`src/x.rs`, a layer of its
//! own) is named in the map, as a heading or as a bullet under its parent's
//! heading, and every path the map names exists. Files inside a directory
//! need not be listed (their module doc comments describe them); a new
//! directory without its paragraph in the map, or a map entry left behind
//! by a removed one, fails here, naming it; so does a map over 400 lines.

use std::collections::BTreeSet;
use std::path::Path;

#[test]
fn every_source_directory_is_in_the_code_map_and_every_entry_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let map = std::fs::read_to_string(root.join("ARCHITECTURE.md")).expect("read ARCHITECTURE.md");
    let lines = map.lines().count();
    assert!(
        lines <= 400,
        "ARCHITECTURE.md has {lines} lines; it stays at most 400 (issue 24): a paragraph per \
         directory, details in the files' module doc comments, figures in BENCHMARKS.md"
    );
    let documented = documented_paths(&map);
    assert!(
        documented.contains("src/core/"),
        "the map reader found no `### \\`src/core/\\`` under `## Code map`: {documented:?}"
    );

    let mut required = Vec::new();
    source_entries(&root.join("src"), root, &mut required);
    let missing: Vec<&String> = required
        .iter()
        .filter(|path| !documented.contains(*path))
        .collect();
    let stale: Vec<&String> = documented
        .iter()
        .filter(|path| !root.join(path.trim_end_matches('/')).exists())
        .collect();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "ARCHITECTURE.md's code map and the tree disagree.\n\
         Not in the map (add a `### \\`dir/\\`` paragraph, or a `- \\`dir/\\`` bullet under \
         its parent's heading): {missing:?}\n\
         In the map but not in the tree: {stale:?}"
    );
}

#[test]
fn the_map_reader_follows_headings_and_nested_bullets() {
    let map = "## Code map\n\
               ### `src/a.rs`\ntext with `src/elsewhere/` in it\n\
               ### `src/core/`\n\
               **Architecture invariant:** `not/a/path/` in prose is not an entry.\n\
               - `driver/`, `tasks/` — two directories\n\
               - `d/` — a directory\n  - `e/` — a directory in it\n  - `f.rs` — a file in it\n\
               - `Daemon` — a type, not a path\n\
               #### `src/core/lsp/`\n- `g.rs` — one\n\
               ### `tests/`\n- `e2e/` — the suite\n\
               ### Not a path\n- `h/` — no directory above it\n\
               ## Decisions\n- `i/` — not the map\n";
    let paths = documented_paths(map);
    let expected: BTreeSet<String> = [
        "src/a.rs",
        "src/core/",
        "src/core/driver/",
        "src/core/tasks/",
        "src/core/d/",
        "src/core/d/e/",
        "src/core/d/f.rs",
        "src/core/lsp/",
        "src/core/lsp/g.rs",
        "tests/",
        "tests/e2e/",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    assert_eq!(paths, expected);
}

#[test]
fn the_tree_walk_asks_for_directories_and_top_modules_only() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut required = Vec::new();
    source_entries(&root.join("src"), root, &mut required);
    assert!(required.contains(&"src/core/".to_string()), "{required:?}");
    assert!(
        required.contains(&"src/config.rs".to_string()),
        "{required:?}"
    );
    assert!(
        !required.contains(&"src/lib.rs".to_string()),
        "{required:?}"
    );
    assert!(
        !required.contains(&"src/main.rs".to_string()),
        "{required:?}"
    );
    assert!(
        !required
            .iter()
            .any(|p| p.starts_with("src/core/") && p.ends_with(".rs")),
        "files inside a directory need not be listed: {required:?}"
    );
}

/// The paths the "Code map" section names: a heading whose first
/// backticked word is a path (`### \`src/x/\``) names it and sets the
/// directory; `- \`name/\`` bullets under it name entries of that
/// directory, and bullets indented under a directory bullet name entries
/// of that one. Only backticked words before the ` — ` that starts a
/// bullet's description count, and only those that look like paths.
fn documented_paths(map: &str) -> BTreeSet<String> {
    let mut paths = BTreeSet::new();
    let mut in_map = false;
    let mut dir = String::new();
    let mut nested_dir: Option<String> = None;
    for line in map.lines() {
        if let Some(title) = line.strip_prefix("## ") {
            in_map = title.trim() == "Code map";
            continue;
        }
        if !in_map {
            continue;
        }
        if line.starts_with("###") {
            let heading = backticked(line).into_iter().next().unwrap_or_default();
            dir = String::new();
            if is_path(&heading) && heading.contains('/') {
                paths.insert(heading.clone());
                if heading.ends_with('/') {
                    dir = heading;
                }
            }
            nested_dir = None;
            continue;
        }
        if dir.is_empty() {
            continue;
        }
        let (indented, bullet) = if let Some(rest) = line.strip_prefix("  - ") {
            (true, rest)
        } else if let Some(rest) = line.strip_prefix("- ") {
            (false, rest)
        } else {
            continue;
        };
        let names_part = bullet.split(" — ").next().unwrap_or("");
        let base = match (&nested_dir, indented) {
            (Some(nested), true) => nested.clone(),
            _ => dir.clone(),
        };
        let mut first_dir = None;
        for name in backticked(names_part) {
            if !is_path(&name) {
                continue;
            }
            let path = format!("{base}{name}");
            if name.ends_with('/') && first_dir.is_none() {
                first_dir = Some(path.clone());
            }
            paths.insert(path);
        }
        if !indented {
            nested_dir = first_dir;
        }
    }
    paths
}

/// A directory (`x/`) or a file with one of the tree's extensions; a type,
/// a method or a command in backticks is not a path.
fn is_path(name: &str) -> bool {
    const EXTENSIONS: [&str; 7] = [".rs", ".lua", ".ts", ".md", ".json", ".sh", ".toml"];
    !name.contains(' ') && (name.ends_with('/') || EXTENSIONS.iter().any(|ext| name.ends_with(ext)))
}

fn backticked(text: &str) -> Vec<String> {
    text.split('`')
        .enumerate()
        .filter(|(i, _)| i % 2 == 1)
        .map(|(_, s)| s.to_string())
        .collect()
}

/// What the map must name, relative to the crate root: every directory
/// under `dir` (as `src/x/`), and the top modules `src/x.rs` (the crate
/// roots `lib.rs` and `main.rs` are the entry points' business).
fn source_entries(dir: &Path, root: &Path, out: &mut Vec<String>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|entry| entry.expect("a directory entry").path())
        .collect();
    entries.sort();
    let top = dir == root.join("src");
    for path in entries {
        let relative = path.strip_prefix(root).expect("under the root");
        let relative = relative.to_string_lossy().replace('\\', "/");
        if path.is_dir() {
            out.push(format!("{relative}/"));
            source_entries(&path, root, out);
        } else if top
            && path.extension().is_some_and(|ext| ext == "rs")
            && relative != "src/lib.rs"
            && relative != "src/main.rs"
        {
            out.push(relative);
        }
    }
}
