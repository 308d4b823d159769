//! The text the model reads: every instruction file in order, most
//! general first, within the 32 KiB cap, with a notice when the cap cut
//! anything.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::discover::Scope;
use super::read::FileText;
use crate::vocab::instructions::InstructionFile;

/// A file found, in the order it is given to the model.
pub(super) struct Found {
    pub path: PathBuf,
    pub scope: Scope,
    pub file: Arc<FileText>,
}

/// What the model is given.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(super) struct Rendered {
    pub files: Vec<InstructionFile>,
    /// Empty when there is nothing to give.
    pub text: String,
    /// The cap's notice, when it cut something (also at the text's end).
    pub cut: Option<String>,
}

const PREAMBLE: &str = "# Instructions from the user and the project\n\n\
The user and the project keep standing instructions for you in the files below. \
Follow them unless the user asks otherwise in the conversation. They are listed from \
the most general (the user's own, then each workspace root's) to the most specific \
(the directory of the file the request is about): when two disagree, the later one wins.";

/// Renders `found` within `cap` bytes of file text (the headers are not
/// counted). The file that crosses the cap is cut at a line break where
/// there is one; the files after it are left out.
pub(super) fn render(found: &[Found], roots: &[PathBuf], cap: usize) -> Rendered {
    let mut rendered = Rendered::default();
    if found.is_empty() {
        return rendered;
    }
    let mut sections = vec![PREAMBLE.to_string()];
    let mut left = cap;
    let mut cuts: Vec<String> = Vec::new();
    for f in found {
        let shown = shown_path(&f.path, roots);
        let text = f.file.text.as_str();
        let take = if text.len() <= left {
            text.len()
        } else {
            cut_point(text, left)
        };
        // Once the cap cuts a file, the files after it are left out whole.
        left = if take < text.len() { 0 } else { left - take };
        let included = (take < text.len()).then_some(take as u64);
        match included {
            Some(0) => cuts.push(format!("{shown} ({} bytes) was left out", f.file.bytes)),
            Some(n) => cuts.push(format!(
                "{shown} was cut after {n} of its {} bytes",
                f.file.bytes
            )),
            None => {}
        }
        if take > 0 {
            let what = match f.scope {
                Scope::User => " (the user's own, for every project)",
                Scope::Root => " (the workspace root's)",
                Scope::Subdirectory => "",
            };
            sections.push(format!(
                "## {shown}{what}\n\n{}",
                text[..take].trim_end_matches('\n')
            ));
        }
        rendered.files.push(InstructionFile {
            path: f.path.display().to_string(),
            bytes: f.file.bytes,
            sha256: f.file.sha256.clone(),
            included_bytes: included,
        });
    }
    if !cuts.is_empty() {
        let notice = format!(
            "[Instructions were cut: they are capped at {} KiB in all, and {}. Read the rest with read_file if you need it.]",
            cap / 1024,
            cuts.join("; ")
        );
        sections.push(notice.clone());
        rendered.cut = Some(notice);
    }
    rendered.text = sections.join("\n\n");
    rendered
}

/// Where to cut `text` to keep at most `max` bytes: after the last line
/// break before `max`, else at the last character boundary.
fn cut_point(text: &str, max: usize) -> usize {
    let mut end = max.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    match text[..end].rfind('\n') {
        Some(line_end) => line_end + 1,
        None => end,
    }
}

/// Relative to the first root when inside it (the model's paths are),
/// else absolute.
fn shown_path(path: &Path, roots: &[PathBuf]) -> String {
    roots
        .first()
        .and_then(|root| path.strip_prefix(root).ok())
        .map(|rel| rel.display().to_string())
        .unwrap_or_else(|| path.display().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(path: &str, scope: Scope, text: &str) -> Found {
        Found {
            path: PathBuf::from(path),
            scope,
            file: Arc::new(FileText {
                bytes: text.len() as u64,
                sha256: format!("h-{path}"),
                text: text.to_string(),
            }),
        }
    }

    #[test]
    fn files_appear_in_order_with_their_scope_and_nothing_is_cut_under_the_cap() {
        let roots = [PathBuf::from("/w")];
        let r = render(
            &[
                found("/u/AGENTS.md", Scope::User, "mine\n"),
                found("/w/AGENTS.md", Scope::Root, "root\n"),
                found("/w/src/AGENTS.md", Scope::Subdirectory, "src\n"),
            ],
            &roots,
            1024,
        );
        let at = |needle: &str| {
            r.text
                .find(needle)
                .unwrap_or_else(|| panic!("{needle}: {}", r.text))
        };
        assert!(at("## /u/AGENTS.md (the user's own") < at("## AGENTS.md (the workspace root's)"));
        assert!(at("## AGENTS.md (the workspace root's)\n\nroot") < at("## src/AGENTS.md\n\nsrc"));
        assert!(r.text.contains("the later one wins"));
        assert_eq!(r.cut, None);
        assert!(r.files.iter().all(|f| f.included_bytes.is_none()));
        assert_eq!(r.files[2].path, "/w/src/AGENTS.md");
    }

    #[test]
    fn the_cap_cuts_at_a_line_break_leaves_out_the_rest_and_says_so() {
        let roots = [PathBuf::from("/w")];
        let r = render(
            &[
                found("/w/AGENTS.md", Scope::Root, "0123456789\nabcdefghij\n"),
                found("/w/src/AGENTS.md", Scope::Subdirectory, "never seen\n"),
            ],
            &roots,
            15,
        );
        assert!(
            r.text.contains("0123456789") && !r.text.contains("abcde"),
            "{}",
            r.text
        );
        assert!(!r.text.contains("never seen"));
        assert_eq!(r.files[0].included_bytes, Some(11));
        assert_eq!(r.files[1].included_bytes, Some(0));
        let cut = r.cut.unwrap();
        assert!(
            cut.contains("AGENTS.md was cut after 11 of its 22 bytes"),
            "{cut}"
        );
        assert!(
            cut.contains("src/AGENTS.md (11 bytes) was left out"),
            "{cut}"
        );
        assert!(r.text.ends_with(&cut));
    }

    #[test]
    fn a_cut_never_splits_a_character() {
        assert_eq!(cut_point("ééé", 3), 2);
        assert_eq!(cut_point("ab\ncd", 4), 3);
        assert_eq!(cut_point("abc", 10), 3);
    }
}
