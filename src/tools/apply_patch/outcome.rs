//! What a patch did, route by route, file by file and hunk by hunk: the
//! vocabulary shared by the editor and disk routes, the waiting and the report.

/// How one route of a patch ended.
pub(super) enum Outcome {
    /// The editor or the user declined; nothing changed.
    Declined {
        reason: Option<String>,
        dismissed: bool,
    },
    /// Applied by the editor (as far as it went) or written to disk.
    Applied {
        files: Vec<(usize, FileOutcome)>,
        route: Route,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Route {
    Disk,
    /// Written through the client's `fs/write_text_file`.
    Client,
    /// Through the editor; how waiting for its changes ended.
    Editor(Wait),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Wait {
    /// Every change showed up.
    Complete,
    /// Some changes showed up, then nothing more for a while.
    Settled,
    /// Nothing showed up in time.
    TimedOut,
}

/// What one file looks like after the patch, compared with the patch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum FileOutcome {
    Added,
    /// Created empty: the file operation was accepted, its text was not.
    AddedEmpty,
    AddedDifferently,
    NotAdded,
    Deleted,
    NotDeleted,
    Updated {
        /// For a move: whether the file is now at its new path.
        moved: Option<bool>,
        hunks: Vec<HunkOutcome>,
    },
    /// The file to update is gone.
    Missing,
}

impl FileOutcome {
    pub(super) fn is_complete(&self) -> bool {
        match self {
            FileOutcome::Added | FileOutcome::Deleted => true,
            FileOutcome::Updated { moved, hunks } => {
                *moved != Some(false) && hunks.iter().all(|h| *h == HunkOutcome::Applied)
            }
            _ => false,
        }
    }

    /// Whether nothing of this file's change landed.
    pub(super) fn is_untouched(&self) -> bool {
        match self {
            FileOutcome::NotAdded | FileOutcome::NotDeleted => true,
            FileOutcome::Updated { moved, hunks } => {
                *moved != Some(true) && hunks.iter().all(|h| *h == HunkOutcome::NotApplied)
            }
            _ => false,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum HunkOutcome {
    Applied,
    /// The original text is still there.
    NotApplied,
    /// The text there is neither the original nor the patch's.
    Changed,
}
