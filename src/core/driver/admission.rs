//! The admission point: hooks that see every batch of claimed inputs before
//! it becomes model messages, and may enter, rewrite or reject it. A hook
//! never sees an input twice; what it leaves out is discarded with a reason.

use crate::vocab::event::UserContent;

/// An input claimed by a turn, as admission hooks see it.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimedInput {
    pub message_id: String,
    pub content: Vec<UserContent>,
}

/// What an admission hook decides about a claimed batch.
#[derive(Debug, Clone, PartialEq)]
pub enum Admission {
    /// Enter these inputs (the batch, possibly rewritten; inputs left out
    /// are discarded).
    Enter(Vec<ClaimedInput>),
    /// Enter none of them.
    Reject { reason: String },
}

/// The pre-step admission point: sees every claimed batch before it
/// becomes model messages, and may enter, rewrite or reject it.
pub trait AdmissionHook: Send + Sync {
    fn admit(&self, session_id: &str, batch: Vec<ClaimedInput>) -> Admission;
}

/// Rejects batches whose text is longer than a limit (`limits.max_input_chars`).
pub struct MaxInputChars(pub usize);

impl AdmissionHook for MaxInputChars {
    fn admit(&self, _session_id: &str, batch: Vec<ClaimedInput>) -> Admission {
        let chars: usize = batch
            .iter()
            .map(|i| {
                crate::core::projection::render_user_content(&i.content)
                    .chars()
                    .count()
            })
            .sum();
        if chars > self.0 {
            Admission::Reject {
                reason: format!(
                    "the input is {chars} characters long (max_input_chars = {})",
                    self.0
                ),
            }
        } else {
            Admission::Enter(batch)
        }
    }
}
