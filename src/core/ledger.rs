//! The file ledger: which files the agent read and edited in a session,
//! and at which step. It is a fold over the log (`read_file` and
//! `apply_patch` calls that completed), rebuilt with the projection when a
//! session is loaded. Compaction appends its rendering to the summary
//! verbatim, so after a compaction the model still knows which files it
//! changed and which it must read again.
//!
//! Invariant: a pure fold of the log; sizes on disk and the editor's unsaved
//! state are looked up by the caller when the ledger is rendered.

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use serde_json::Value;

use crate::vocab::event::{Event, ToolStatus};

/// A step of a session: its turn and its number within the turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepRef {
    pub turn_id: String,
    pub step: u32,
}

impl fmt::Display for StepRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "step {} of {}", self.step, self.turn_id)
    }
}

/// What the ledger knows of one file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileEntry {
    pub last_read: Option<StepRef>,
    pub last_edit: Option<StepRef>,
}

/// What the daemon knows of a file when the ledger is rendered: its size
/// (`None` when it does not exist) and whether the editor holds changes
/// not yet saved.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FileFacts {
    pub size: Option<u64>,
    pub unsaved: bool,
}

#[derive(Debug, Clone)]
enum Access {
    Read(String),
    Edit(Vec<String>),
}

/// The files of a session, by path as the agent named them.
#[derive(Debug, Clone, Default)]
pub struct Ledger {
    files: BTreeMap<String, FileEntry>,
    current: Option<StepRef>,
    pending: HashMap<String, Access>,
}

/// The first line of a rendered ledger.
pub const LEDGER_HEADING: &str = "Files in this session:";

impl Ledger {
    /// Folds a whole log.
    pub fn from_events<'a>(events: impl IntoIterator<Item = &'a Event>) -> Self {
        let mut ledger = Ledger::default();
        for event in events {
            ledger.apply(event);
        }
        ledger
    }

    pub fn files(&self) -> &BTreeMap<String, FileEntry> {
        &self.files
    }

    /// Folds one event; a call counts once its result says it completed.
    pub fn apply(&mut self, event: &Event) {
        match event {
            Event::StepStart { turn_id, step } => {
                self.current = Some(StepRef {
                    turn_id: turn_id.to_string(),
                    step: *step,
                });
            }
            Event::ToolCall {
                call_id,
                name,
                arguments,
                ..
            } => {
                let access = match name.as_str() {
                    "read_file" => arguments
                        .get("path")
                        .and_then(Value::as_str)
                        .map(|p| Access::Read(p.to_string())),
                    "apply_patch" => arguments
                        .get("input")
                        .or_else(|| arguments.get("patch"))
                        .and_then(Value::as_str)
                        .map(|patch| Access::Edit(patched_paths(patch))),
                    _ => None,
                };
                if let Some(access) = access {
                    self.pending.insert(call_id.clone(), access);
                }
            }
            Event::ToolResult {
                call_id, status, ..
            } => {
                let Some(access) = self.pending.remove(call_id) else {
                    return;
                };
                let (Some(step), ToolStatus::Completed) = (self.current.clone(), status) else {
                    return;
                };
                match access {
                    Access::Read(path) => {
                        self.files.entry(path).or_default().last_read = Some(step);
                    }
                    Access::Edit(paths) => {
                        for path in paths {
                            self.files.entry(path).or_default().last_edit = Some(step.clone());
                        }
                    }
                }
            }
            _ => {}
        }
    }

    /// The ledger as a text block, one line a file, or `None` when no file
    /// was read or edited. `facts` looks up a file's size and editor state.
    pub fn render(&self, facts: impl Fn(&str) -> Option<FileFacts>) -> Option<String> {
        if self.files.is_empty() {
            return None;
        }
        let mut out = LEDGER_HEADING.to_string();
        for (path, entry) in &self.files {
            let mut parts = Vec::new();
            if let Some(read) = &entry.last_read {
                parts.push(format!("read at {read}"));
            }
            if let Some(edit) = &entry.last_edit {
                parts.push(format!("edited at {edit}"));
            }
            if let Some(facts) = facts(path) {
                parts.push(match facts.size {
                    Some(size) => format!("{size} bytes"),
                    None => "does not exist now".to_string(),
                });
                if facts.unsaved {
                    parts.push("unsaved changes in the editor".to_string());
                }
            }
            out.push_str(&format!("\n- {path} — {}", parts.join(", ")));
        }
        Some(out)
    }
}

/// The paths an `apply_patch` input touches: added, updated, deleted and
/// moved-to files.
fn patched_paths(patch: &str) -> Vec<String> {
    const MARKERS: [&str; 4] = [
        "*** Add File:",
        "*** Update File:",
        "*** Delete File:",
        "*** Move to:",
    ];
    let mut paths: Vec<String> = Vec::new();
    for line in patch.lines() {
        let line = line.trim();
        for marker in MARKERS {
            if let Some(path) = line.strip_prefix(marker) {
                let path = path.trim().to_string();
                if !path.is_empty() && !paths.contains(&path) {
                    paths.push(path);
                }
            }
        }
    }
    paths
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn step(turn: &str, step: u32) -> Event {
        Event::StepStart {
            turn_id: turn.into(),
            step,
        }
    }

    fn call(id: &str, name: &str, arguments: Value) -> Event {
        Event::ToolCall {
            turn_id: "t1".into(),
            call_id: id.to_string(),
            name: name.to_string(),
            arguments,
            title: String::new(),
            kind: crate::vocab::tool_call::ToolKind::Other,
            mcp: None,
        }
    }

    fn result(id: &str, status: ToolStatus) -> Event {
        Event::ToolResult {
            turn_id: "t1".into(),
            call_id: id.to_string(),
            status,
            output: String::new(),
        }
    }

    fn at(turn: &str, step: u32) -> Option<StepRef> {
        Some(StepRef {
            turn_id: turn.to_string(),
            step,
        })
    }

    #[test]
    fn completed_reads_and_patches_are_recorded_at_their_step() {
        let patch = "*** Begin Patch\n*** Update File: src/a.rs\n*** Move to: src/b.rs\n@@\n-x\n+y\n*** Add File: new.txt\n+hi\n*** Delete File: old.txt\n*** End Patch";
        let ledger = Ledger::from_events(&[
            step("t1", 1),
            call("c1", "read_file", json!({"path": "src/a.rs"})),
            result("c1", ToolStatus::Completed),
            step("t1", 2),
            call("c2", "apply_patch", json!({ "input": patch })),
            result("c2", ToolStatus::Completed),
        ]);
        let files = ledger.files();
        assert_eq!(files["src/a.rs"].last_read, at("t1", 1));
        assert_eq!(files["src/a.rs"].last_edit, at("t1", 2));
        for path in ["src/b.rs", "new.txt", "old.txt"] {
            assert_eq!(files[path].last_edit, at("t1", 2), "{path}");
            assert_eq!(files[path].last_read, None, "{path}");
        }
    }

    #[test]
    fn failed_rejected_and_other_calls_are_not_recorded() {
        let ledger = Ledger::from_events(&[
            step("t1", 1),
            call("c1", "read_file", json!({"path": "missing.rs"})),
            result("c1", ToolStatus::Failed),
            call("c2", "apply_patch", json!({"input": "*** Add File: x\n+1"})),
            result("c2", ToolStatus::Rejected),
            call("c3", "grep", json!({"path": "src"})),
            result("c3", ToolStatus::Completed),
        ]);
        assert!(ledger.files().is_empty());
        assert_eq!(ledger.render(|_| None), None);
    }

    #[test]
    fn a_later_read_moves_the_read_step_and_keeps_the_edit() {
        let ledger = Ledger::from_events(&[
            step("t1", 1),
            call("c1", "apply_patch", json!({"patch": "*** Add File: a\n+1"})),
            result("c1", ToolStatus::Completed),
            step("t2", 1),
            call("c2", "read_file", json!({"path": "a"})),
            result("c2", ToolStatus::Completed),
        ]);
        assert_eq!(ledger.files()["a"].last_edit, at("t1", 1));
        assert_eq!(ledger.files()["a"].last_read, at("t2", 1));
    }

    #[test]
    fn the_rendering_has_one_line_a_file_with_size_and_editor_state() {
        let ledger = Ledger::from_events(&[
            step("t1", 1),
            call("c1", "read_file", json!({"path": "a.rs"})),
            result("c1", ToolStatus::Completed),
            call(
                "c2",
                "apply_patch",
                json!({"input": "*** Delete File: b.rs"}),
            ),
            result("c2", ToolStatus::Completed),
        ]);
        let text = ledger
            .render(|path| {
                Some(match path {
                    "a.rs" => FileFacts {
                        size: Some(1234),
                        unsaved: true,
                    },
                    _ => FileFacts::default(),
                })
            })
            .unwrap();
        assert_eq!(
            text,
            "Files in this session:\n\
             - a.rs — read at step 1 of t1, 1234 bytes, unsaved changes in the editor\n\
             - b.rs — edited at step 1 of t1, does not exist now"
        );
        let bare = ledger.render(|_| None).unwrap();
        assert!(bare.ends_with("- b.rs — edited at step 1 of t1"), "{bare}");
    }
}
