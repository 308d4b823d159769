//! `grep {pattern, path?, glob?, limit?}`: regex search, gitignore-aware.
//!
//! Built from ripgrep's libraries: the walk of `ignore` with the same
//! rules as `list_files`, sorted, its files searched on one thread per core
//! (`ordered_search.rs`), binary files skipped. Open documents are searched
//! from the buffer cache, so matches reflect unsaved edits.
//!
//! Output: `path:line:text` in path order (a directory's files together,
//! as `list_files` lists them; without a `path`, each root in turn), then
//! line order, at most `limit` matches (counted across roots).
//! The search stops at the first match past `limit` and says so
//! (`[truncated: …]`): a monorepo's common word is not searched to the end
//! of the tree, and memory holds only the files in flight.
use std::cell::RefCell;
use std::collections::HashSet;
use std::io;
use std::path::{Path, PathBuf};

use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkMatch};
use serde::Deserialize;
use serde_json::{json, Value};

use super::list_files::{compile_glob, display_under, place, sorted_walk, walk_targets};
use super::ordered_search::{search_in_order, Flow};
use super::{parse_args, ApprovalClass, ExecMode, Tool, ToolContext, ToolError, ToolEvent};
use crate::vocab::event::ToolLocation;
use crate::vocab::tool_call::ToolKind;
use crate::workspace::PathGlob;

pub struct Grep;

/// Matches shown when the model gives no `limit`.
pub const DEFAULT_LIMIT: usize = 100;
/// Longer matching lines are cut; one minified line could fill the context.
pub const MAX_LINE_CHARS: usize = 500;
pub const LINE_TRUNCATED: &str = "… [line truncated]";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    pattern: String,
    path: Option<String>,
    glob: Option<String>,
    limit: Option<usize>,
}

#[async_trait::async_trait]
impl Tool for Grep {
    fn name(&self) -> &'static str {
        "grep"
    }

    fn description(&self) -> &'static str {
        "Searches workspace files for a regular expression (Rust regex syntax, like ripgrep) \
         and returns matching lines as `path:line:text`, skipping binary, hidden and \
         gitignored files. Narrow with `path` (a directory or file) and `glob`."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "pattern": {
                    "type": "string",
                    "description": "Regular expression matched against each line, e.g. `fn \\w+_test` or `(?i)todo`."
                },
                "path": {
                    "type": "string",
                    "description": "Directory or file to search, relative to the workspace root or absolute inside it. Defaults to the workspace root."
                },
                "glob": {
                    "type": "string",
                    "description": "Only search files whose path matches this glob. Without `/` it matches file names at any depth (`*.rs`); with `/` it matches the path relative to the workspace root (`src/**/*.rs`)."
                },
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "description": "Maximum number of matching lines to return. Defaults to 100."
                }
            },
            "required": ["pattern"],
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
        let pattern = args.get("pattern").and_then(Value::as_str).unwrap_or("");
        match args
            .get("path")
            .and_then(Value::as_str)
            .filter(|p| !p.is_empty())
        {
            Some(path) => format!("Grep /{pattern}/ in {path}"),
            None => format!("Grep /{pattern}/"),
        }
    }

    fn timeout(&self) -> Option<std::time::Duration> {
        Some(super::READ_TOOL_TIMEOUT)
    }

    async fn run(&self, args: Value, ctx: &ToolContext) -> Result<String, ToolError> {
        let args: Args = parse_args(self.name(), &args)?;
        let limit = args.limit.unwrap_or(DEFAULT_LIMIT);
        if limit == 0 {
            return Err(ToolError::new(
                "limit must be at least 1 (it is a number of matches)",
            ));
        }
        let matcher = RegexMatcherBuilder::new()
            // As in ripgrep: lets the regex engine search line by line fast,
            // and makes a pattern that needs `\n` an error rather than a miss.
            .line_terminator(Some(b'\n'))
            .build(&args.pattern)
            .map_err(|e| ToolError::new(format!("invalid regex /{}/: {e}", args.pattern)))?;
        let glob = compile_glob(args.glob.as_deref())?;
        let targets = walk_targets(ctx, args.path.as_deref())?;
        let search = Search {
            ctx: ctx.clone(),
            matcher,
            glob,
            limit,
            open: ctx.buffers.open_paths().into_iter().collect(),
        };
        let results = tokio::task::spawn_blocking(move || {
            let shown = targets[0].1.clone();
            search.run(&targets).map(|r| (r, shown))
        })
        .await
        .map_err(|e| ToolError::new(format!("grep failed internally: {e}")))?;
        let (results, shown) = results?;
        let hits = hit_locations(ctx, &results);
        if !hits.is_empty() {
            (ctx.emit)(ToolEvent::Locations(hits));
        }
        Ok(render(
            results,
            limit,
            &args.pattern,
            &shown,
            args.glob.as_deref(),
        ))
    }
}

/// Editors follow at most this many of a search's files.
const MAX_LOCATIONS: usize = 50;

/// Each file with hits, at its first hit, in output order.
fn hit_locations(ctx: &ToolContext, found: &Found) -> Vec<ToolLocation> {
    found
        .files
        .iter()
        .take(MAX_LOCATIONS)
        .filter_map(|(shown, lines)| {
            let path = ctx.workspace.resolve(shown).ok()?;
            Some(ToolLocation {
                path: path.display().to_string(),
                line: lines
                    .first()
                    .map(|m| u32::try_from(m.line).unwrap_or(u32::MAX)),
            })
        })
        .collect()
}

/// The only way this tool reads an open document's text.
fn text_of(ctx: &ToolContext, path: &Path) -> io::Result<String> {
    ctx.buffers.read_text(path)
}

/// One matching line.
#[derive(Debug)]
struct LineMatch {
    line: u64,
    text: String,
}

/// What the search found: the first `limit` matches in output order.
#[derive(Debug, Default)]
struct Found {
    files: Vec<(String, Vec<LineMatch>)>,
    kept: usize,
    /// Matches seen: all of them, unless `stopped`.
    total: usize,
    /// It stopped at the first match past the limit.
    stopped: bool,
    /// Files whose results were taken (the walk's progress).
    files_searched: usize,
}

impl Found {
    /// Takes one file's result; stops once a match past `limit` is seen.
    fn take(&mut self, file: Option<(String, FileMatches)>, limit: usize) -> Flow {
        self.files_searched += 1;
        let Some((path, mut file)) = file else {
            return Flow::Continue;
        };
        self.total += file.count;
        file.lines.truncate(limit - self.kept);
        self.kept += file.lines.len();
        if !file.lines.is_empty() {
            self.files.push((path, file.lines));
        }
        if self.total > limit {
            self.stopped = true;
            return Flow::Stop;
        }
        Flow::Continue
    }
}

struct Search {
    ctx: ToolContext,
    matcher: RegexMatcher,
    glob: Option<PathGlob>,
    limit: usize,
    /// Open documents, looked up once: the walk is too hot for the cache lock.
    open: HashSet<PathBuf>,
}

thread_local! {
    /// Each worker's searcher (its buffers are reused from file to file).
    static SEARCHER: RefCell<Searcher> = RefCell::new(new_searcher());
}

impl Search {
    /// Searches every target (a path, or each root) in turn into one
    /// result, until the first match past `limit` in all.
    fn run(&self, targets: &[(PathBuf, String)]) -> Result<Found, ToolError> {
        let mut found = Found::default();
        for (target, shown) in targets {
            if found.stopped || self.ctx.cancel.is_cancelled() {
                break;
            }
            self.search_target(target, shown, &mut found);
        }
        if self.ctx.cancel.is_cancelled() {
            return Err(ToolError::new("grep was cancelled"));
        }
        Ok(found)
    }

    fn search_target(&self, target: &Path, shown: &str, found: &mut Found) {
        if target.is_file() {
            // Named explicitly, a file is searched whatever the ignore rules
            // and glob say, as ripgrep does.
            let file = self.search_file(&mut new_searcher(), target);
            found.take(file.map(|f| (shown.to_string(), f)), self.limit);
            return;
        }
        let cancel = &self.ctx.cancel;
        let files = sorted_walk(target)
            .take_while(|_| !cancel.is_cancelled())
            // Unreadable entries are skipped, as ripgrep does.
            .filter_map(Result::ok)
            .filter(|entry| entry.file_type().is_some_and(|t| t.is_file()))
            .map(ignore::DirEntry::into_path)
            .filter(|path| {
                self.glob
                    .as_ref()
                    .is_none_or(|g| g.is_match(&display_under(shown, target, path)))
            });
        let threads = std::thread::available_parallelism().map_or(2, |n| n.get().min(12));
        search_in_order(
            files,
            threads,
            |path| {
                if cancel.is_cancelled() {
                    return None;
                }
                let file = SEARCHER.with(|s| self.search_file(&mut s.borrow_mut(), &path))?;
                Some((display_under(shown, target, &path), file))
            },
            |file| found.take(file, self.limit),
        );
    }

    /// A file's matches; `None` when it has none, is binary or is unreadable.
    fn search_file(&self, searcher: &mut Searcher, path: &Path) -> Option<FileMatches> {
        let mut sink = FileMatches::new(self.limit);
        let searched = if self.open.contains(path) {
            let text = text_of(&self.ctx, path).ok()?;
            searcher.search_slice(&self.matcher, text.as_bytes(), &mut sink)
        } else {
            searcher.search_path(&self.matcher, path, &mut sink)
        };
        // A binary file is skipped whole, even if lines before its first NUL
        // byte matched: those lines would be noise the model cannot read.
        if searched.is_err() || sink.binary || sink.lines.is_empty() {
            return None;
        }
        Some(sink)
    }
}

fn new_searcher() -> Searcher {
    SearcherBuilder::new()
        .binary_detection(BinaryDetection::quit(b'\x00'))
        .line_number(true)
        .build()
}

/// One file's matching lines, no more than any output can show; it stops
/// reading at the first match past them (the search stops there anyway).
#[derive(Debug)]
struct FileMatches {
    lines: Vec<LineMatch>,
    count: usize,
    limit: usize,
    binary: bool,
}

impl FileMatches {
    fn new(limit: usize) -> Self {
        FileMatches {
            lines: Vec::new(),
            count: 0,
            limit,
            binary: false,
        }
    }
}

impl Sink for FileMatches {
    type Error = io::Error;

    fn matched(&mut self, _searcher: &Searcher, found: &SinkMatch<'_>) -> Result<bool, io::Error> {
        self.count += 1;
        if self.lines.len() < self.limit {
            self.lines.push(LineMatch {
                line: found.line_number().unwrap_or(0),
                text: cut_line(found.bytes()),
            });
        }
        Ok(self.count <= self.limit)
    }

    fn binary_data(&mut self, _searcher: &Searcher, _offset: u64) -> Result<bool, io::Error> {
        self.binary = true;
        Ok(false)
    }
}

fn cut_line(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let text = text.trim_end_matches(['\n', '\r']);
    match text.char_indices().nth(MAX_LINE_CHARS) {
        Some((cut, _)) => format!("{}{LINE_TRUNCATED}", &text[..cut]),
        None => text.to_string(),
    }
}

fn render(found: Found, limit: usize, pattern: &str, shown: &str, glob: Option<&str>) -> String {
    if found.total == 0 {
        let mut out = format!("No matches for /{pattern}/ in {}", place(shown));
        if let Some(glob) = glob.filter(|g| !g.is_empty()) {
            out.push_str(&format!(" (files matching `{glob}`)"));
        }
        return out;
    }
    let mut out = String::new();
    for (path, lines) in &found.files {
        for m in lines {
            out.push_str(&format!("{path}:{}:{}\n", m.line, m.text));
        }
    }
    if found.stopped {
        out.push_str(&format!(
            "[truncated: the first {limit} matches; the search stopped there, so there are more: narrow it with `path` or `glob`, or raise `limit`]\n"
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::test_support::workspace_with;

    async fn grep(ctx: &ToolContext, args: Value) -> Result<String, ToolError> {
        Grep.run(args, ctx).await
    }

    fn truncated(limit: usize) -> String {
        format!("[truncated: the first {limit} matches; the search stopped there, so there are more: narrow it with `path` or `glob`, or raise `limit`]")
    }

    #[tokio::test]
    async fn matches_are_sorted_by_path_then_line() {
        let (_dir, ctx) = workspace_with(&[
            ("src/b.rs", "fn b() {}\nlet x = 1;\nfn c() {}\n"),
            ("src/a.rs", "fn a() {}\n"),
            ("main.rs", "// fn in a comment\n"),
        ]);
        let out = grep(&ctx, json!({"pattern": r"fn \w+\("})).await.unwrap();
        assert_eq!(
            out,
            "src/a.rs:1:fn a() {}\nsrc/b.rs:1:fn b() {}\nsrc/b.rs:3:fn c() {}\n"
        );
    }

    #[tokio::test]
    async fn gitignored_and_hidden_files_are_not_searched() {
        let (_dir, ctx) = workspace_with(&[
            (".gitignore", "target/\n*.log\n"),
            ("target/out.rs", "needle\n"),
            ("debug.log", "needle\n"),
            (".hidden/x.rs", "needle\n"),
            ("src/lib.rs", "needle\n"),
        ]);
        let out = grep(&ctx, json!({"pattern": "needle"})).await.unwrap();
        assert_eq!(out, "src/lib.rs:1:needle\n");
    }

    #[tokio::test]
    async fn glob_restricts_the_files_searched() {
        let (_dir, ctx) = workspace_with(&[
            ("a.rs", "needle\n"),
            ("b.md", "needle\n"),
            ("src/c.rs", "needle\n"),
        ]);
        let out = grep(&ctx, json!({"pattern": "needle", "glob": "*.rs"}))
            .await
            .unwrap();
        assert_eq!(out, "a.rs:1:needle\nsrc/c.rs:1:needle\n");
        let out = grep(&ctx, json!({"pattern": "needle", "glob": "src/*.rs"}))
            .await
            .unwrap();
        assert_eq!(out, "src/c.rs:1:needle\n");
    }

    #[tokio::test]
    async fn path_narrows_the_search_to_a_directory_or_a_file() {
        let (_dir, ctx) = workspace_with(&[("a.rs", "needle\n"), ("src/b.rs", "x\nneedle\n")]);
        let dir = grep(&ctx, json!({"pattern": "needle", "path": "src"}))
            .await
            .unwrap();
        assert_eq!(dir, "src/b.rs:2:needle\n");
        let file = grep(&ctx, json!({"pattern": "needle", "path": "a.rs"}))
            .await
            .unwrap();
        assert_eq!(file, "a.rs:1:needle\n");
    }

    #[tokio::test]
    async fn limit_keeps_the_first_matches_in_path_order_and_says_there_are_more() {
        let (_dir, ctx) = workspace_with(&[
            ("a.txt", "hit 1\nhit 2\n"),
            ("b.txt", "hit 3\n"),
            ("c.txt", "hit 4\nhit 5\n"),
        ]);
        let out = grep(&ctx, json!({"pattern": "hit", "limit": 3}))
            .await
            .unwrap();
        assert_eq!(
            out,
            format!(
                "a.txt:1:hit 1\na.txt:2:hit 2\nb.txt:1:hit 3\n{}\n",
                truncated(3)
            )
        );
    }

    #[tokio::test]
    async fn exactly_limit_matches_are_not_truncated() {
        let (_dir, ctx) = workspace_with(&[("a.txt", "hit\nhit\n"), ("b.txt", "hit\n")]);
        let out = grep(&ctx, json!({"pattern": "hit", "limit": 3}))
            .await
            .unwrap();
        assert_eq!(out, "a.txt:1:hit\na.txt:2:hit\nb.txt:1:hit\n");
    }

    #[test]
    fn the_search_stops_at_the_first_match_past_the_limit() {
        let files: Vec<(String, &str)> = (0..400)
            .map(|i| (format!("d{:02}/f{i:03}.rs", i / 40), "fn hit() {}\n"))
            .collect();
        let files: Vec<(&str, &str)> = files.iter().map(|(p, t)| (p.as_str(), *t)).collect();
        let (dir, ctx) = workspace_with(&files);
        let search = Search {
            ctx: ctx.clone(),
            matcher: RegexMatcherBuilder::new().build("hit").unwrap(),
            glob: None,
            limit: 5,
            open: HashSet::new(),
        };
        let found = search
            .run(&[(dir.path().canonicalize().unwrap(), ".".to_string())])
            .unwrap();
        assert!(found.stopped);
        let shown: Vec<&str> = found.files.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(
            shown,
            [
                "d00/f000.rs",
                "d00/f001.rs",
                "d00/f002.rs",
                "d00/f003.rs",
                "d00/f004.rs"
            ]
        );
        assert_eq!(
            found.files_searched, 6,
            "one file past the limit, then stop"
        );
    }

    #[tokio::test]
    async fn every_root_is_searched_in_turn_and_the_limit_counts_across_them() {
        use crate::tools::test_support::two_roots_with;
        let hits = [("a.rs", "hit\n"), ("b.rs", "hit\n")];
        let (_a, b, ctx) = two_roots_with(&hits, &hits);
        let second = ctx
            .workspace
            .display_path(&b.path().canonicalize().unwrap());
        let all = grep(&ctx, json!({"pattern": "hit"})).await.unwrap();
        assert_eq!(
            all,
            format!("a.rs:1:hit\nb.rs:1:hit\n{second}/a.rs:1:hit\n{second}/b.rs:1:hit\n")
        );
        let three = grep(&ctx, json!({"pattern": "hit", "limit": 3}))
            .await
            .unwrap();
        assert_eq!(
            three,
            format!(
                "a.rs:1:hit\nb.rs:1:hit\n{second}/a.rs:1:hit\n{}\n",
                truncated(3)
            )
        );
        // The first root's matches fill the limit: the second is still
        // looked into, only as far as its first match.
        let two = grep(&ctx, json!({"pattern": "hit", "limit": 2}))
            .await
            .unwrap();
        assert_eq!(two, format!("a.rs:1:hit\nb.rs:1:hit\n{}\n", truncated(2)));
    }

    #[tokio::test]
    async fn one_file_past_the_limit_is_read_no_further() {
        let many: String = (0..10_000).map(|i| format!("hit {i}\n")).collect();
        let (_dir, ctx) = workspace_with(&[("a.txt", &many)]);
        let out = grep(&ctx, json!({"pattern": "hit", "limit": 2, "path": "a.txt"}))
            .await
            .unwrap();
        assert_eq!(
            out,
            format!("a.txt:1:hit 0\na.txt:2:hit 1\n{}\n", truncated(2))
        );
    }

    #[tokio::test]
    async fn default_limit_is_100_matches() {
        let many: String = (0..150).map(|i| format!("hit {i}\n")).collect();
        let (_dir, ctx) = workspace_with(&[("a.txt", &many)]);
        let out = grep(&ctx, json!({"pattern": "hit"})).await.unwrap();
        assert_eq!(out.lines().count(), 101);
        assert_eq!(out.lines().last().unwrap(), truncated(100));
    }

    #[tokio::test]
    async fn no_match_is_a_result_not_an_error() {
        let (_dir, ctx) = workspace_with(&[("src/a.rs", "hay\n")]);
        let out = grep(&ctx, json!({"pattern": "needle", "path": "src"}))
            .await
            .unwrap();
        assert_eq!(out, "No matches for /needle/ in `src`");
    }

    #[tokio::test]
    async fn invalid_regex_is_an_error_with_the_regex_message() {
        let (_dir, ctx) = workspace_with(&[("a.rs", "")]);
        let err = grep(&ctx, json!({"pattern": "fn (unclosed"}))
            .await
            .unwrap_err();
        assert!(err.0.starts_with("invalid regex /fn (unclosed/:"), "{err}");
        assert!(err.0.contains("unclosed group"), "{err}");
    }

    #[tokio::test]
    async fn binary_files_are_skipped_even_with_matches_before_the_nul() {
        let (dir, ctx) = workspace_with(&[("text.txt", "needle\n")]);
        std::fs::write(dir.path().join("blob.bin"), b"needle\n\0\x01\x02needle\n").unwrap();
        let out = grep(&ctx, json!({"pattern": "needle"})).await.unwrap();
        assert_eq!(out, "text.txt:1:needle\n");
    }

    #[tokio::test]
    async fn long_matching_lines_are_cut() {
        let long = format!("needle{}\n", "x".repeat(1000));
        let (_dir, ctx) = workspace_with(&[("a.txt", &long)]);
        let out = grep(&ctx, json!({"pattern": "needle"})).await.unwrap();
        let expected = format!(
            "a.txt:1:needle{}{LINE_TRUNCATED}\n",
            "x".repeat(MAX_LINE_CHARS - 6)
        );
        assert_eq!(out, expected);
    }

    #[tokio::test]
    async fn open_buffers_are_searched_instead_of_disk() {
        let (dir, ctx) = workspace_with(&[("a.rs", "old needle\n"), ("b.rs", "needle on disk\n")]);
        let a = dir.path().canonicalize().unwrap().join("a.rs");
        ctx.buffers.open(a, 2, "line one\nnew needle\n");
        let out = grep(&ctx, json!({"pattern": "needle"})).await.unwrap();
        assert_eq!(out, "a.rs:2:new needle\nb.rs:1:needle on disk\n");
    }

    #[tokio::test]
    async fn path_escaping_the_workspace_is_a_tool_error() {
        let (_dir, ctx) = workspace_with(&[]);
        let err = grep(&ctx, json!({"pattern": "root", "path": "../../etc"}))
            .await
            .unwrap_err();
        assert!(err.0.contains("is outside the workspace"), "{err}");
    }

    #[tokio::test]
    async fn symlink_escaping_the_workspace_is_a_tool_error() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret.txt"), "needle\n").unwrap();
        let (dir, ctx) = workspace_with(&[]);
        std::os::unix::fs::symlink(outside.path(), dir.path().join("link")).unwrap();
        let err = grep(&ctx, json!({"pattern": "needle", "path": "link"}))
            .await
            .unwrap_err();
        assert!(err.0.contains("resolves through a symlink"), "{err}");
        // Walking the root does not follow the link either.
        let out = grep(&ctx, json!({"pattern": "needle"})).await.unwrap();
        assert_eq!(out, "No matches for /needle/ in the workspace root");
    }

    #[tokio::test]
    async fn cancelled_search_stops_with_an_error() {
        let (_dir, ctx) = workspace_with(&[("a.rs", "needle\n")]);
        ctx.cancel.cancel();
        let err = grep(&ctx, json!({"pattern": "needle"})).await.unwrap_err();
        assert_eq!(err.0, "grep was cancelled");
    }

    #[test]
    fn title_names_pattern_and_path() {
        assert_eq!(
            Grep.title(&json!({"pattern": "foo", "path": "src"})),
            "Grep /foo/ in src"
        );
        assert_eq!(Grep.title(&json!({"pattern": "foo"})), "Grep /foo/");
    }
}
