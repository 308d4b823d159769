//! `list_files {path?, glob?, limit?}`: gitignore-aware listing.
//!
//! Output: root-relative paths (as `read_file` takes them) in path order,
//! a directory followed by what it holds, one per line; directories end in
//! `/` and are listed only without a `glob`. Without a `path`, every root
//! is walked, one after the other (the first root's entries, then the
//! others', absolute). The walk stops at the first entry past the limit
//! (counted across roots), with a last line `[truncated: …]` saying so: a
//! monorepo is not walked to its end to show 500 names. The listing is of
//! the disk: open buffers never create entries.
use std::path::{Path, PathBuf};

use ignore::Walk;
use serde::Deserialize;
use serde_json::{json, Value};

use super::{parse_args, ApprovalClass, ExecMode, Tool, ToolContext, ToolError, ToolEvent};
use crate::vocab::event::ToolLocation;
use crate::vocab::tool_call::ToolKind;
use crate::workspace::{walk_builder, PathGlob};

pub struct ListFiles;

/// Entries shown when the model gives no `limit`.
pub const DEFAULT_LIMIT: usize = 500;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    path: Option<String>,
    glob: Option<String>,
    limit: Option<usize>,
}

#[async_trait::async_trait]
impl Tool for ListFiles {
    fn name(&self) -> &'static str {
        "list_files"
    }

    fn description(&self) -> &'static str {
        "Lists files and directories under a workspace directory, recursively, skipping \
         hidden files and whatever .gitignore ignores. Use `glob` to find files by name \
         (e.g. `*.rs` or `src/**/test_*.py`)."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {
                    "type": "string",
                    "description": "Directory to list, relative to the workspace root or absolute inside it. Defaults to the workspace root."
                },
                "glob": {
                    "type": "string",
                    "description": "Only list files whose path matches this glob. Without `/` it matches file names at any depth (`*.rs`); with `/` it matches the path relative to the workspace root (`src/*.rs` for direct children, `src/**/*.rs` for any depth). Directories are not listed when a glob is given."
                },
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "description": "Maximum number of entries to return. Defaults to 500."
                }
            },
            "additionalProperties": false
        })
    }

    fn mode(&self) -> ExecMode {
        ExecMode::Parallel
    }

    fn approval(&self) -> ApprovalClass {
        ApprovalClass::Read
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Search
    }

    fn title(&self, args: &Value) -> String {
        let path = args
            .get("path")
            .and_then(Value::as_str)
            .filter(|p| !p.is_empty());
        let mut title = format!("List {}", path.unwrap_or("workspace"));
        if let Some(glob) = args.get("glob").and_then(Value::as_str) {
            title.push_str(&format!(" ({glob})"));
        }
        title
    }

    fn timeout(&self) -> Option<std::time::Duration> {
        Some(super::READ_TOOL_TIMEOUT)
    }

    async fn run(&self, args: Value, ctx: &ToolContext) -> Result<String, ToolError> {
        let args: Args = parse_args(self.name(), &args)?;
        let limit = args.limit.unwrap_or(DEFAULT_LIMIT);
        if limit == 0 {
            return Err(ToolError::new(
                "limit must be at least 1 (it is a number of entries)",
            ));
        }
        let glob = compile_glob(args.glob.as_deref())?;
        let targets = walk_targets(ctx, args.path.as_deref())?;
        (ctx.emit)(ToolEvent::Locations(
            targets
                .iter()
                .map(|(dir, _)| ToolLocation {
                    path: dir.display().to_string(),
                    line: None,
                })
                .collect(),
        ));
        if let [(dir, shown)] = &targets[..] {
            if !dir.is_dir() {
                // Listing a file is a fair question with an obvious answer.
                return Ok(format!("{shown}\n"));
            }
        }
        let ctx = ctx.clone();
        tokio::task::spawn_blocking(move || {
            let listing = list_targets(&ctx, &targets, glob.as_ref(), limit)?;
            Ok(render(listing, limit, &targets[0].1, args.glob.as_deref()))
        })
        .await
        .map_err(|e| ToolError::new(format!("list_files failed internally: {e}")))?
    }
}

/// What a walk covers, each with its displayed name: the path the model
/// gave, or, without one, every root of the workspace (the first shown as
/// `.`, the others absolute). Each exists.
pub(crate) fn walk_targets(
    ctx: &ToolContext,
    path: Option<&str>,
) -> Result<Vec<(PathBuf, String)>, ToolError> {
    let dirs = match path {
        // A root inside another is walked with it, once.
        None if !ctx.workspace.roots().is_empty() => {
            let roots = ctx.workspace.roots();
            roots
                .iter()
                .filter(|r| !roots.iter().any(|o| o != *r && r.starts_with(o)))
                .cloned()
                .collect()
        }
        _ => vec![ctx
            .workspace
            .resolve(path.unwrap_or("."))
            .map_err(|e| ToolError::new(e.to_string()))?],
    };
    dirs.into_iter()
        .map(|dir| {
            let shown = ctx.workspace.display_path(&dir);
            if !dir.exists() {
                return Err(ToolError::new(format!("`{shown}` does not exist")));
            }
            Ok((dir, shown))
        })
        .collect()
}

/// An empty glob means no glob; an invalid one is an error the model can fix.
pub(crate) fn compile_glob(glob: Option<&str>) -> Result<Option<PathGlob>, ToolError> {
    match glob.filter(|g| !g.is_empty()) {
        None => Ok(None),
        Some(pattern) => PathGlob::new(pattern)
            .map(Some)
            .map_err(|e| ToolError::new(format!("invalid glob `{pattern}`: {e}"))),
    }
}

/// The displayed form of a walked path, built from the displayed walk root
/// so that the hot loop takes no locks.
pub(crate) fn display_under(shown_root: &str, root: &Path, path: &Path) -> String {
    let relative = crate::workspace::slash_path(path.strip_prefix(root).unwrap_or(path));
    match (shown_root, relative.as_str()) {
        (_, ".") => shown_root.to_string(),
        (".", _) => relative,
        _ => format!("{}/{relative}", shown_root.trim_end_matches('/')),
    }
}

/// The walk of `list_files` and `grep`: their ignore rules, depth first,
/// each directory's entries sorted by name (byte order), so a directory's
/// contents follow it.
pub(crate) fn sorted_walk(dir: &Path) -> Walk {
    walk_builder(dir).sort_by_file_name(|a, b| a.cmp(b)).build()
}

/// What a listing walked: at most `limit + 1` entries in path order.
#[derive(Debug)]
struct Listing {
    entries: Vec<String>,
    /// Entries (files and directories) the walk went through.
    walked: usize,
}

/// Each target listed in turn, until one entry past `limit` in all.
fn list_targets(
    ctx: &ToolContext,
    targets: &[(PathBuf, String)],
    glob: Option<&PathGlob>,
    limit: usize,
) -> Result<Listing, ToolError> {
    let mut listing = Listing {
        entries: Vec::new(),
        walked: 0,
    };
    for (dir, shown) in targets {
        let left = limit.saturating_sub(listing.entries.len());
        let part = list(ctx, dir, shown, glob, left)?;
        listing.entries.extend(part.entries);
        listing.walked += part.walked;
        if listing.entries.len() > limit {
            break;
        }
    }
    Ok(listing)
}

fn list(
    ctx: &ToolContext,
    dir: &Path,
    shown: &str,
    glob: Option<&PathGlob>,
    limit: usize,
) -> Result<Listing, ToolError> {
    let mut listing = Listing {
        entries: Vec::new(),
        walked: 0,
    };
    for entry in sorted_walk(dir) {
        if ctx.cancel.is_cancelled() {
            return Err(ToolError::new("list_files was cancelled"));
        }
        listing.walked += 1;
        // Unreadable entries (permissions, races with deletion) are skipped,
        // as ripgrep does; the rest of the listing is still useful.
        let Ok(entry) = entry else { continue };
        if entry.depth() == 0 {
            continue;
        }
        let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
        let path = display_under(shown, dir, entry.path());
        match glob {
            Some(glob) if !is_dir && glob.is_match(&path) => listing.entries.push(path),
            Some(_) => {}
            None if is_dir => listing.entries.push(format!("{path}/")),
            None => listing.entries.push(path),
        }
        // One past the limit: there are more, and that is all `render` says.
        if listing.entries.len() > limit {
            break;
        }
    }
    Ok(listing)
}

fn render(listing: Listing, limit: usize, shown: &str, glob: Option<&str>) -> String {
    let entries = listing.entries;
    if entries.is_empty() {
        return match glob {
            Some(glob) => format!("No files match `{glob}` in {}", place(shown)),
            None => format!("{} is empty (or everything in it is ignored)", place(shown)),
        };
    }
    let mut out: String = entries
        .iter()
        .take(limit)
        .map(|e| format!("{e}\n"))
        .collect();
    if entries.len() > limit {
        out.push_str(&format!(
            "[truncated: the first {limit} entries; the listing stopped there, so there are more: narrow it with `path` or `glob`, or raise `limit`]\n"
        ));
    }
    out
}

/// How a searched directory is named in messages.
pub(crate) fn place(shown: &str) -> String {
    if shown == "." {
        "the workspace root".to_string()
    } else {
        format!("`{shown}`")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::test_support::workspace_with;

    async fn list(ctx: &ToolContext, args: Value) -> Result<String, ToolError> {
        ListFiles.run(args, ctx).await
    }

    #[tokio::test]
    async fn lists_sorted_root_relative_paths_with_directories_marked() {
        let (_dir, ctx) =
            workspace_with(&[("src/main.rs", ""), ("src/a/b.rs", ""), ("README.md", "")]);
        let out = list(&ctx, json!({})).await.unwrap();
        assert_eq!(out, "README.md\nsrc/\nsrc/a/\nsrc/a/b.rs\nsrc/main.rs\n");
    }

    #[tokio::test]
    async fn every_root_is_listed_in_turn_and_the_limit_counts_across_them() {
        use crate::tools::test_support::two_roots_with;
        let (_a, b, ctx) = two_roots_with(&[("x.rs", "")], &[("y.rs", ""), ("z.rs", "")]);
        let second = ctx
            .workspace
            .display_path(&b.path().canonicalize().unwrap());
        let all = list(&ctx, json!({})).await.unwrap();
        assert_eq!(all, format!("x.rs\n{second}/y.rs\n{second}/z.rs\n"));
        let two = list(&ctx, json!({"limit": 2})).await.unwrap();
        assert_eq!(
            two,
            format!("x.rs\n{second}/y.rs\n[truncated: the first 2 entries; the listing stopped there, so there are more: narrow it with `path` or `glob`, or raise `limit`]\n")
        );
        // A first root that fills the limit still says there are more.
        let one = list(&ctx, json!({"limit": 1})).await.unwrap();
        assert!(
            one.starts_with("x.rs\n[truncated: the first 1 entries"),
            "{one}"
        );
    }

    #[tokio::test]
    async fn listing_a_subdirectory_keeps_paths_root_relative() {
        let (_dir, ctx) = workspace_with(&[("src/a/b.rs", ""), ("other.rs", "")]);
        let out = list(&ctx, json!({"path": "src"})).await.unwrap();
        assert_eq!(out, "src/a/\nsrc/a/b.rs\n");
    }

    #[tokio::test]
    async fn gitignored_files_and_directories_are_skipped_outside_a_git_repo() {
        let (_dir, ctx) = workspace_with(&[
            (".gitignore", "target/\n*.log\n"),
            ("target/debug/app", ""),
            ("build.log", ""),
            ("src/run.log", ""),
            (".ignore", "secret.txt\n"),
            ("secret.txt", ""),
            (".hidden/x", ""),
            ("src/lib.rs", ""),
        ]);
        let out = list(&ctx, json!({})).await.unwrap();
        assert_eq!(out, "src/\nsrc/lib.rs\n");
    }

    #[tokio::test]
    async fn root_gitignore_applies_when_listing_a_subdirectory() {
        let (_dir, ctx) = workspace_with(&[
            (".gitignore", "*.tmp\n"),
            ("src/a.tmp", ""),
            ("src/b.rs", ""),
        ]);
        let out = list(&ctx, json!({"path": "src"})).await.unwrap();
        assert_eq!(out, "src/b.rs\n");
    }

    #[tokio::test]
    async fn git_directory_is_never_listed() {
        let (_dir, ctx) = workspace_with(&[(".git/HEAD", "ref"), ("a.rs", "")]);
        let out = list(&ctx, json!({})).await.unwrap();
        assert_eq!(out, "a.rs\n");
    }

    #[tokio::test]
    async fn glob_filters_files_and_omits_directories() {
        let (_dir, ctx) = workspace_with(&[
            ("src/main.rs", ""),
            ("src/a/b.rs", ""),
            ("src/notes.md", ""),
            ("x.rs", ""),
        ]);
        let by_name = list(&ctx, json!({"glob": "*.rs"})).await.unwrap();
        assert_eq!(by_name, "src/a/b.rs\nsrc/main.rs\nx.rs\n");
        let direct = list(&ctx, json!({"glob": "src/*"})).await.unwrap();
        assert_eq!(direct, "src/main.rs\nsrc/notes.md\n");
        let deep = list(&ctx, json!({"glob": "src/**/*.rs"})).await.unwrap();
        assert_eq!(deep, "src/a/b.rs\nsrc/main.rs\n");
    }

    #[tokio::test]
    async fn glob_matching_nothing_says_so() {
        let (_dir, ctx) = workspace_with(&[("a.rs", "")]);
        let out = list(&ctx, json!({"glob": "*.py"})).await.unwrap();
        assert_eq!(out, "No files match `*.py` in the workspace root");
    }

    #[tokio::test]
    async fn invalid_glob_is_an_error_naming_it() {
        let (_dir, ctx) = workspace_with(&[("a.rs", "")]);
        let err = list(&ctx, json!({"glob": "src/[a"})).await.unwrap_err();
        assert!(err.0.starts_with("invalid glob `src/[a`:"), "{err}");
    }

    #[tokio::test]
    async fn limit_cuts_the_sorted_listing_with_a_note() {
        let files: Vec<(String, &str)> = (0..5).map(|i| (format!("f{i}.txt"), "")).collect();
        let files: Vec<(&str, &str)> = files.iter().map(|(p, t)| (p.as_str(), *t)).collect();
        let (_dir, ctx) = workspace_with(&files);
        let out = list(&ctx, json!({"limit": 2})).await.unwrap();
        assert_eq!(
            out,
            "f0.txt\nf1.txt\n[truncated: the first 2 entries; the listing stopped there, so there are more: narrow it with `path` or `glob`, or raise `limit`]\n"
        );
    }

    #[test]
    fn the_walk_stops_at_the_first_entry_past_the_limit() {
        let files: Vec<(String, &str)> = (0..200)
            .map(|i| (format!("d{:02}/f{i:03}.txt", i / 20), ""))
            .collect();
        let files: Vec<(&str, &str)> = files.iter().map(|(p, t)| (p.as_str(), *t)).collect();
        let (dir, ctx) = workspace_with(&files);
        let root = dir.path().canonicalize().unwrap();
        let listing = super::list(&ctx, &root, ".", None, 5).unwrap();
        // d00/, then its first files: six entries, the sixth proving more.
        assert_eq!(listing.entries.len(), 6);
        assert_eq!(listing.entries[0], "d00/");
        assert!(
            listing.walked < 20,
            "walked {} of 210 entries for a limit of 5",
            listing.walked
        );
        let glob = compile_glob(Some("*.txt")).unwrap();
        let listing = super::list(&ctx, &root, ".", glob.as_ref(), 30).unwrap();
        assert_eq!(listing.entries.len(), 31);
        assert!(listing.walked < 40, "walked {}", listing.walked);
    }

    #[tokio::test]
    async fn a_directory_is_followed_by_its_contents() {
        let (_dir, ctx) = workspace_with(&[("a/x.rs", ""), ("a.rs", ""), ("b/c.rs", "")]);
        let out = list(&ctx, json!({})).await.unwrap();
        assert_eq!(out, "a/\na/x.rs\na.rs\nb/\nb/c.rs\n");
    }

    #[tokio::test]
    async fn missing_directory_is_an_error() {
        let (_dir, ctx) = workspace_with(&[]);
        let err = list(&ctx, json!({"path": "nope"})).await.unwrap_err();
        assert_eq!(err.0, "`nope` does not exist");
    }

    #[tokio::test]
    async fn path_outside_the_workspace_is_a_tool_error() {
        let (_dir, ctx) = workspace_with(&[]);
        let err = list(&ctx, json!({"path": "/etc"})).await.unwrap_err();
        assert!(err.0.contains("is outside the workspace"), "{err}");
    }

    #[tokio::test]
    async fn cancelled_listing_stops_with_an_error() {
        let (_dir, ctx) = workspace_with(&[("a.rs", "")]);
        ctx.cancel.cancel();
        let err = list(&ctx, json!({})).await.unwrap_err();
        assert_eq!(err.0, "list_files was cancelled");
    }

    #[test]
    fn title_names_the_directory() {
        assert_eq!(ListFiles.title(&json!({"path": "src"})), "List src");
        assert_eq!(ListFiles.title(&json!({})), "List workspace");
    }
}
