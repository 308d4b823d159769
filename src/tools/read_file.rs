//! `read_file {path, offset?, limit?}`: numbered lines, from the buffer when open.
//!
//! Output is `cat -n` style: `{n:>6}\t{line}` per line, lines over
//! [`MAX_LINE_CHARS`] cut with [`LINE_TRUNCATED`], and when lines remain
//! after the window a last line `[... N more lines; continue with offset=M]`.
//! A file on disk over 1 MiB that is no open buffer is read only through
//! the window, so its last line says more follows without counting them
//! ([`range`]). Through a client that owns the files (ACP) the client
//! sends the whole text: there is no range read on that wire.
use std::io;
use std::path::Path;

use serde::Deserialize;
use serde_json::{json, Value};

use super::{parse_args, ApprovalClass, ExecMode, Tool, ToolContext, ToolError, ToolEvent};
use crate::vocab::bridge::{BridgeOutcome, ClientFile};
use crate::vocab::event::ToolLocation;
use crate::vocab::tool_call::ToolKind;

mod range;

pub struct ReadFile;

/// Lines shown when the model gives no `limit`.
pub const DEFAULT_LIMIT: usize = 2000;
/// Longer lines are cut; minified files would otherwise flood the context.
pub const MAX_LINE_CHARS: usize = 2000;
pub const LINE_TRUNCATED: &str = "… [line truncated]";
/// How much of a file is checked for NUL bytes to call it binary.
const BINARY_PROBE_BYTES: usize = 8 * 1024;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    path: String,
    offset: Option<usize>,
    limit: Option<usize>,
}

#[async_trait::async_trait]
impl Tool for ReadFile {
    fn name(&self) -> &'static str {
        "read_file"
    }

    fn description(&self) -> &'static str {
        "Reads a text file of the workspace and returns its lines numbered like `cat -n`, \
         including unsaved edits in the editor. Reads up to 2000 lines from `offset`; \
         for longer files, continue with the offset given at the end of the output."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {
                    "type": "string",
                    "description": "File to read: relative to the workspace root, or absolute inside the workspace."
                },
                "offset": {
                    "type": "integer",
                    "minimum": 1,
                    "description": "1-based number of the first line to return. Defaults to 1."
                },
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "description": "Maximum number of lines to return. Defaults to 2000."
                }
            },
            "required": ["path"],
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
        ToolKind::Read
    }

    fn title(&self, args: &Value) -> String {
        match args.get("path").and_then(Value::as_str) {
            Some(path) => format!("Read {path}"),
            None => "Read file".to_string(),
        }
    }

    fn timeout(&self) -> Option<std::time::Duration> {
        Some(super::READ_TOOL_TIMEOUT)
    }

    async fn run(&self, args: Value, ctx: &ToolContext) -> Result<String, ToolError> {
        let args: Args = parse_args(self.name(), &args)?;
        // Models often count from 0; line 0 can only mean the first line.
        let offset = args.offset.unwrap_or(1).max(1);
        let limit = args.limit.unwrap_or(DEFAULT_LIMIT);
        if limit == 0 {
            return Err(ToolError::new(
                "limit must be at least 1 (it is a number of lines)",
            ));
        }
        let path = ctx
            .workspace
            .resolve(&args.path)
            .map_err(|e| ToolError::new(e.to_string()))?;
        let shown = ctx.workspace.display_path(&path);
        if path.is_file() {
            (ctx.emit)(ToolEvent::Locations(vec![ToolLocation {
                path: path.display().to_string(),
                line: Some(u32::try_from(offset).unwrap_or(u32::MAX)),
            }]));
        }
        if ctx.bridge.facilities().read_text_file && !path.is_dir() {
            let text = read_through_client(ctx, path, &shown).await?;
            if is_binary(text.as_bytes()) {
                return Err(binary_error(&shown));
            }
            return number_lines(&text, offset, limit, &shown);
        }
        let ctx = ctx.clone();
        tokio::task::spawn_blocking(move || {
            if let Some(size) = big_file_on_disk(&ctx, &path) {
                return range::read_window(&path, size, offset, limit, &shown);
            }
            let text = read_text_file(&ctx, &path, &shown)?;
            number_lines(&text, offset, limit, &shown)
        })
        .await
        .map_err(|e| ToolError::new(format!("read_file failed internally: {e}")))?
    }
}

/// Reads through a client that owns the files (ACP's `fs/read_text_file`):
/// it answers with its buffer, unsaved text included.
pub async fn read_through_client(
    ctx: &ToolContext,
    path: std::path::PathBuf,
    shown: &str,
) -> Result<String, ToolError> {
    let file = ClientFile {
        session_id: ctx.session_id.clone(),
        path,
    };
    match ctx.bridge.read_text_file(file, &ctx.cancel).await {
        BridgeOutcome::Answered(text) => Ok(text),
        BridgeOutcome::Cancelled => Err(ToolError::new(format!("reading `{shown}` was cancelled"))),
        BridgeOutcome::Unavailable(why) => Err(ToolError::new(format!(
            "the editor could not read `{shown}`: {why}"
        ))),
    }
}

/// Without a client that owns the files, the only way this tool reads a
/// file: the open buffer, else the disk.
fn text_of(ctx: &ToolContext, path: &Path) -> io::Result<String> {
    ctx.buffers.read_text(path)
}

/// The size of `path` when it is a file that is no open buffer and too big
/// to read whole for a window ([`range::COUNT_WHOLE_BYTES`]).
fn big_file_on_disk(ctx: &ToolContext, path: &Path) -> Option<u64> {
    let meta = std::fs::metadata(path).ok()?;
    let big = meta.is_file() && meta.len() > range::COUNT_WHOLE_BYTES;
    (big && ctx.buffers.snapshot(path).is_none()).then_some(meta.len())
}

fn read_text_file(ctx: &ToolContext, path: &Path, shown: &str) -> Result<String, ToolError> {
    if path.is_dir() {
        return Err(ToolError::new(format!(
            "`{shown}` is a directory, not a file; use list_files to see what it contains"
        )));
    }
    match text_of(ctx, path) {
        Ok(text) if is_binary(text.as_bytes()) => Err(binary_error(shown)),
        Ok(text) => Ok(text),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Err(ToolError::new(format!(
            "`{shown}` does not exist; use list_files or grep to find the file you mean"
        ))),
        // Not UTF-8, so not from an open buffer: decide from the bytes on disk
        // whether this is binary or text in some other encoding.
        Err(e) if e.kind() == io::ErrorKind::InvalidData => {
            let bytes = std::fs::read(path)
                .map_err(|e| ToolError::new(format!("cannot read `{shown}`: {e}")))?;
            if is_binary(&bytes) {
                Err(binary_error(shown))
            } else {
                Ok(String::from_utf8_lossy(&bytes).into_owned())
            }
        }
        Err(e) => Err(ToolError::new(format!("cannot read `{shown}`: {e}"))),
    }
}

fn is_binary(bytes: &[u8]) -> bool {
    bytes[..bytes.len().min(BINARY_PROBE_BYTES)].contains(&0)
}

fn binary_error(shown: &str) -> ToolError {
    ToolError::new(format!(
        "`{shown}` is a binary file; read_file only shows text"
    ))
}

fn number_lines(text: &str, offset: usize, limit: usize, shown: &str) -> Result<String, ToolError> {
    // `lines` strips `\n` and `\r\n`, and a final newline adds no empty line.
    let total = text.lines().count();
    if total == 0 {
        return Ok(format!("[`{shown}` is empty]"));
    }
    if offset > total {
        return Err(ToolError::new(format!(
            "offset {offset} is past the end of `{shown}`, which has {total} lines"
        )));
    }
    let mut out = String::new();
    let mut last = offset - 1;
    for (index, line) in text.lines().enumerate().skip(offset - 1).take(limit) {
        last = index + 1;
        push_numbered(&mut out, last, line);
    }
    if last < total {
        out.push_str(&format!(
            "[... {} more lines; continue with offset={}]\n",
            total - last,
            last + 1
        ));
    }
    Ok(out)
}

/// One output line: its number, a tab, the line cut at [`MAX_LINE_CHARS`].
fn push_numbered(out: &mut String, number: usize, line: &str) {
    out.push_str(&format!("{number:>6}\t"));
    match line.char_indices().nth(MAX_LINE_CHARS) {
        Some((cut, _)) => {
            out.push_str(&line[..cut]);
            out.push_str(LINE_TRUNCATED);
        }
        None => out.push_str(line),
    }
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::test_support::workspace_with;

    async fn read(ctx: &ToolContext, args: Value) -> Result<String, ToolError> {
        ReadFile.run(args, ctx).await
    }

    fn lines(n: usize) -> String {
        (1..=n).map(|i| format!("line {i}\n")).collect()
    }

    #[tokio::test]
    async fn lines_are_numbered_like_cat_n_with_line_endings_stripped() {
        let (_dir, ctx) = workspace_with(&[("a.txt", "first\r\nsecond\n\nfourth")]);
        let out = read(&ctx, json!({"path": "a.txt"})).await.unwrap();
        assert_eq!(
            out,
            "     1\tfirst\n     2\tsecond\n     3\t\n     4\tfourth\n"
        );
    }

    #[tokio::test]
    async fn offset_and_limit_select_a_window_and_say_how_to_continue() {
        let (_dir, ctx) = workspace_with(&[("a.txt", &lines(10))]);
        let out = read(&ctx, json!({"path": "a.txt", "offset": 3, "limit": 2}))
            .await
            .unwrap();
        assert_eq!(
            out,
            "     3\tline 3\n     4\tline 4\n[... 6 more lines; continue with offset=5]\n"
        );
    }

    #[tokio::test]
    async fn default_window_is_2000_lines_with_a_continuation_note() {
        let (_dir, ctx) = workspace_with(&[("big.txt", &lines(2120))]);
        let out = read(&ctx, json!({"path": "big.txt"})).await.unwrap();
        let last_two: Vec<&str> = out.lines().rev().take(2).collect();
        assert_eq!(
            last_two,
            [
                "[... 120 more lines; continue with offset=2001]",
                "  2000\tline 2000"
            ]
        );
    }

    #[tokio::test]
    async fn window_reaching_the_end_has_no_continuation_note() {
        let (_dir, ctx) = workspace_with(&[("a.txt", &lines(3))]);
        let out = read(&ctx, json!({"path": "a.txt", "offset": 2}))
            .await
            .unwrap();
        assert_eq!(out, "     2\tline 2\n     3\tline 3\n");
    }

    #[tokio::test]
    async fn offset_past_the_end_is_an_error_naming_the_line_count() {
        let (_dir, ctx) = workspace_with(&[("a.txt", &lines(12))]);
        let err = read(&ctx, json!({"path": "a.txt", "offset": 50}))
            .await
            .unwrap_err();
        assert_eq!(
            err.0,
            "offset 50 is past the end of `a.txt`, which has 12 lines"
        );
    }

    #[tokio::test]
    async fn long_lines_are_cut_with_a_marker() {
        let long = "x".repeat(MAX_LINE_CHARS + 10);
        let (_dir, ctx) = workspace_with(&[("min.js", &long)]);
        let out = read(&ctx, json!({"path": "min.js"})).await.unwrap();
        assert_eq!(
            out,
            format!("     1\t{}{LINE_TRUNCATED}\n", "x".repeat(MAX_LINE_CHARS))
        );
    }

    #[tokio::test]
    async fn missing_file_is_an_error_pointing_at_list_files() {
        let (_dir, ctx) = workspace_with(&[]);
        let err = read(&ctx, json!({"path": "src/nope.rs"}))
            .await
            .unwrap_err();
        assert!(err.0.starts_with("`src/nope.rs` does not exist"), "{err}");
    }

    #[tokio::test]
    async fn directory_is_an_error_pointing_at_list_files() {
        let (_dir, ctx) = workspace_with(&[("src/a.rs", "")]);
        let err = read(&ctx, json!({"path": "src"})).await.unwrap_err();
        assert!(
            err.0.contains("`src` is a directory") && err.0.contains("list_files"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn binary_file_is_an_error() {
        let (dir, ctx) = workspace_with(&[]);
        std::fs::write(
            dir.path().join("a.png"),
            b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\xff",
        )
        .unwrap();
        std::fs::write(dir.path().join("nul.bin"), b"text\0more").unwrap();
        for path in ["a.png", "nul.bin"] {
            let err = read(&ctx, json!({"path": path})).await.unwrap_err();
            assert_eq!(
                err.0,
                format!("`{path}` is a binary file; read_file only shows text")
            );
        }
    }

    #[tokio::test]
    async fn non_utf8_text_is_shown_lossily() {
        let (dir, ctx) = workspace_with(&[]);
        std::fs::write(dir.path().join("latin1.txt"), b"caf\xe9\n").unwrap();
        let out = read(&ctx, json!({"path": "latin1.txt"})).await.unwrap();
        assert_eq!(out, "     1\tcaf\u{fffd}\n");
    }

    #[tokio::test]
    async fn open_buffer_is_read_instead_of_disk() {
        let (dir, ctx) = workspace_with(&[("a.rs", "on disk\n")]);
        let path = dir.path().canonicalize().unwrap().join("a.rs");
        ctx.buffers.open(path, 3, "unsaved edit\n");
        let out = read(&ctx, json!({"path": "a.rs"})).await.unwrap();
        assert_eq!(out, "     1\tunsaved edit\n");
    }

    #[tokio::test]
    async fn path_outside_the_workspace_is_a_tool_error() {
        let (_dir, ctx) = workspace_with(&[]);
        let err = read(&ctx, json!({"path": "../../etc/passwd"}))
            .await
            .unwrap_err();
        assert!(err.0.contains("is outside the workspace"), "{err}");
    }

    #[tokio::test]
    async fn unknown_argument_is_an_error_naming_it() {
        let (_dir, ctx) = workspace_with(&[("a.txt", "a")]);
        let err = read(&ctx, json!({"path": "a.txt", "lines": 3}))
            .await
            .unwrap_err();
        assert!(err.0.contains("unknown field `lines`"), "{err}");
    }

    #[tokio::test]
    async fn a_big_file_on_disk_is_read_through_its_window_and_an_open_one_counted() {
        let text = lines(200_000);
        assert!(text.len() as u64 > range::COUNT_WHOLE_BYTES);
        let (dir, ctx) = workspace_with(&[("big.txt", &text)]);
        let args = json!({"path": "big.txt", "offset": 100, "limit": 2});
        let out = read(&ctx, args.clone()).await.unwrap();
        assert_eq!(
            out,
            format!(
                "   100\tline 100\n   101\tline 101\n[... more lines follow; the file has {} \
                 bytes, read to byte 801; continue with offset=102]\n",
                text.len()
            )
        );
        let path = dir.path().canonicalize().unwrap().join("big.txt");
        ctx.buffers.open(path, 1, &text);
        let out = read(&ctx, args).await.unwrap();
        assert!(
            out.ends_with("[... 199899 more lines; continue with offset=102]\n"),
            "{out}"
        );
    }

    #[test]
    fn title_names_the_path() {
        assert_eq!(
            ReadFile.title(&json!({"path": "src/main.rs"})),
            "Read src/main.rs"
        );
    }
}
