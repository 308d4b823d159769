//! ARCHITECTURE.md's code map is the tree: every source file under `src/`
//! is named in the map, under the heading or bullet of its directory, and
//! every file the map names exists. A new module without its line in the
//! map (or a map line left behind by a removed one) fails here, naming it.

use std::collections::BTreeSet;
use std::path::Path;

#[test]
fn every_source_file_is_in_the_code_map_and_every_entry_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let map = std::fs::read_to_string(root.join("ARCHITECTURE.md")).expect("read ARCHITECTURE.md");
    let documented = documented_paths(&map);

    let mut files = Vec::new();
    source_files(&root.join("src"), root, &mut files);
    let missing: Vec<&String> = files
        .iter()
        .filter(|file| !is_documented(file, &documented))
        .collect();
    let stale: Vec<&String> = documented
        .iter()
        .filter(|path| !root.join(path.trim_end_matches('/')).exists())
        .collect();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "ARCHITECTURE.md's code map and src/ disagree.\n\
         Not in the map (add a line under its directory): {missing:?}\n\
         In the map but not in the tree: {stale:?}"
    );
}

#[test]
fn the_map_reader_follows_headings_and_nested_bullets() {
    let map = "## Code map\n\
               ### `src/a.rs`\ntext\n\
               ### `src/core/`\n\
               - `x.rs`, `y.rs` — two files\n\
               - `d/` — a directory\n  - `mod.rs` — its root\n  - `e.rs` — a part\n\
               #### `src/core/lsp/`\n- `f.rs` — one\n\
               ## Choices\n- `g.rs` — not the map\n";
    let paths = documented_paths(map);
    let expected: BTreeSet<String> = [
        "src/a.rs",
        "src/core/",
        "src/core/x.rs",
        "src/core/y.rs",
        "src/core/d/",
        "src/core/d/mod.rs",
        "src/core/d/e.rs",
        "src/core/lsp/",
        "src/core/lsp/f.rs",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    assert_eq!(paths, expected);
    assert!(is_documented("src/core/lsp/mod.rs", &paths));
    assert!(!is_documented("src/core/z.rs", &paths));
}

/// A file is documented when the map names it, or, for a directory's
/// `mod.rs`, when it names the directory.
fn is_documented(file: &str, documented: &BTreeSet<String>) -> bool {
    if documented.contains(file) {
        return true;
    }
    match file.strip_suffix("mod.rs") {
        Some(dir) => documented.contains(dir),
        None => false,
    }
}

/// The paths the "Code map" section names: headings (`### \`src/x/\``)
/// set the directory, `- \`name\`` bullets name entries in it, and bullets
/// indented under a directory bullet (`- \`d/\``) name entries of `d/`.
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
            if heading.starts_with("src/") {
                paths.insert(heading.clone());
                dir = if heading.ends_with('/') {
                    heading
                } else {
                    String::new()
                };
            } else {
                dir = String::new();
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
        // The names are the backticked words before the dash that starts
        // the description.
        let names_part = bullet.split(" — ").next().unwrap_or("");
        let base = match (&nested_dir, indented) {
            (Some(nested), true) => nested.clone(),
            _ => dir.clone(),
        };
        let mut first_dir = None;
        for name in backticked(names_part) {
            if name.contains(' ') || name.starts_with("src/") {
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

fn backticked(text: &str) -> Vec<String> {
    text.split('`')
        .enumerate()
        .filter(|(i, _)| i % 2 == 1)
        .map(|(_, s)| s.to_string())
        .collect()
}

/// Every `.rs` file under `dir`, as a path relative to the crate root;
/// `lib.rs` and `main.rs` are the crate roots the entry points describe.
fn source_files(dir: &Path, root: &Path, out: &mut Vec<String>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|entry| entry.expect("a directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            source_files(&path, root, out);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            let relative = path.strip_prefix(root).expect("under the root");
            let relative = relative.to_string_lossy().replace('\\', "/");
            if relative != "src/lib.rs" && relative != "src/main.rs" {
                out.push(relative);
            }
        }
    }
}
