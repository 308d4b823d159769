//! [`DiagnosticsStore`]: the diagnostics the editor last reported for each
//! document (`tandem/diagnosticsChanged`), with the document version they
//! are for and when they came, so that a tool can wait for the editor's
//! verdict on a version it just produced instead of polling.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use parking_lot::RwLock;
use tokio::sync::watch;
use tokio::time::Instant;

use super::cache::normalize_path;
use crate::vocab::language::Diagnostic;

/// One report of the editor.
#[derive(Debug, Clone, PartialEq)]
pub struct DiagnosticsReport {
    /// The document version the diagnostics are for, when the editor said.
    pub version: Option<i32>,
    pub diagnostics: Vec<Diagnostic>,
    /// When it arrived.
    pub at: Instant,
}

#[derive(Debug, Default)]
pub struct DiagnosticsStore {
    reports: RwLock<HashMap<PathBuf, DiagnosticsReport>>,
    /// Bumped after every report.
    changes: watch::Sender<u64>,
}

impl DiagnosticsStore {
    /// Records the editor's diagnostics of `path`, replacing the last ones.
    pub fn report(&self, path: &Path, version: Option<i32>, diagnostics: Vec<Diagnostic>) {
        let report = DiagnosticsReport {
            version,
            diagnostics,
            at: Instant::now(),
        };
        self.reports.write().insert(normalize_path(path), report);
        self.changes.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Drops what was reported for `path` (its document closed).
    pub(super) fn forget(&self, path: &Path) {
        self.reports.write().remove(path);
    }

    /// The last report for `path`, if any.
    pub fn get(&self, path: &Path) -> Option<DiagnosticsReport> {
        self.reports.read().get(&normalize_path(path)).cloned()
    }

    /// A receiver marked changed after every report from now on.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }
}
