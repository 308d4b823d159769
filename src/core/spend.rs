//! What a workspace has spent today, across sessions and daemon runs: the
//! day cap of `[budget]` (`max_cost_per_day`, `max_tokens_per_day`).
//!
//! Invariant: the session logs are the source of truth. A workspace's day
//! is computed from the logs the first time it is asked for; after that
//! only calls that were already logged are added, so a restarted daemon
//! finds the same total, and a call is never counted twice (a charge to a
//! day not yet read is dropped: reading the logs will find it).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use parking_lot::Mutex;

use super::log::{now_rfc3339, read_log_contents};
use crate::vocab::event::{Event, Usage};
use crate::vocab::pricing::{price_of, Price};

/// Money and tokens spent.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Spent {
    pub usd: f64,
    pub tokens: u64,
}

/// The daemon's tally of today's spending per workspace (its roots).
pub struct SpendBook {
    sessions_dir: PathBuf,
    days: Mutex<HashMap<(String, Vec<PathBuf>), Spent>>,
}

impl SpendBook {
    pub fn new(sessions_dir: PathBuf) -> SpendBook {
        SpendBook {
            sessions_dir,
            days: Mutex::new(HashMap::new()),
        }
    }

    /// What the sessions of `roots` spent today (UTC). `pricing` and
    /// `model` price compactions of logs that name no model.
    pub fn today(
        &self,
        roots: &[PathBuf],
        pricing: &BTreeMap<String, Price>,
        model: &str,
    ) -> Spent {
        let key = (today(), roots.to_vec());
        let mut days = self.days.lock();
        *days
            .entry(key.clone())
            .or_insert_with(|| scan_day(&self.sessions_dir, &key.0, roots, pricing, model))
    }

    /// Adds a call that is already in its session's log.
    pub fn charge(&self, roots: &[PathBuf], usd: f64, tokens: u64) {
        let key = (today(), roots.to_vec());
        let mut days = self.days.lock();
        if let Some(spent) = days.get_mut(&key) {
            spent.usd += usd;
            spent.tokens += tokens;
        }
    }
}

/// Today's date in UTC, `YYYY-MM-DD`, as log timestamps begin.
fn today() -> String {
    now_rfc3339()[..10].to_string()
}

/// Sums the calls of `day` in every log of `dir` whose session has
/// `roots`: each `usage_update`'s call (its logged cost) and each
/// compaction's summarizing call (priced by the log's model).
fn scan_day(
    dir: &Path,
    day: &str,
    roots: &[PathBuf],
    pricing: &BTreeMap<String, Price>,
    model: &str,
) -> Spent {
    let mut spent = Spent::default();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return spent;
    };
    let day_start = day_start(day);
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().and_then(|e| e.to_str()) != Some("jsonl") {
            continue;
        }
        // A log untouched since before today holds nothing of today.
        let modified = entry.metadata().and_then(|m| m.modified()).ok();
        if let (Some(modified), Some(start)) = (modified, day_start) {
            if modified < start {
                continue;
            }
        }
        let contents = match read_log_contents(&path) {
            Ok(contents) => contents,
            Err(e) => {
                tracing::warn!("day budget: skipping {}: {e}", path.display());
                continue;
            }
        };
        if contents.header.workspace != roots {
            continue;
        }
        let mut log_model = model.to_string();
        for logged in &contents.events {
            if let Event::AssistantMessage { model, .. } = &logged.event {
                log_model.clone_from(model);
            }
            if !logged.ts.starts_with(day) {
                continue;
            }
            match &logged.event {
                Event::UsageUpdate { call, cost, .. } => {
                    spent.tokens += call.total();
                    spent.usd += cost.map(|c| c.call).unwrap_or(0.0);
                }
                Event::Compacted { usage, .. } => {
                    spent.tokens += usage.total();
                    spent.usd += cost_of(&log_model, pricing, usage);
                }
                _ => {}
            }
        }
    }
    spent
}

fn cost_of(model: &str, pricing: &BTreeMap<String, Price>, usage: &Usage) -> f64 {
    price_of(model, pricing).map_or(0.0, |p| p.cost(usage))
}

/// Midnight UTC of `day` (`YYYY-MM-DD`).
fn day_start(day: &str) -> Option<std::time::SystemTime> {
    let mut parts = day.splitn(3, '-').map(|p| p.parse::<u16>().ok());
    let (year, month, mday) = (parts.next()??, parts.next()??, parts.next()??);
    let month = time::Month::try_from(u8::try_from(month).ok()?).ok()?;
    let date =
        time::Date::from_calendar_date(i32::from(year), month, u8::try_from(mday).ok()?).ok()?;
    let midnight = date.midnight().assume_utc();
    Some(std::time::SystemTime::from(midnight))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_charge_to_a_day_not_yet_read_is_left_to_the_logs() {
        let dir = tempfile::tempdir().unwrap();
        let book = SpendBook::new(dir.path().to_path_buf());
        let roots = vec![PathBuf::from("/w")];
        book.charge(&roots, 1.0, 10);
        let none = BTreeMap::new();
        assert_eq!(book.today(&roots, &none, "m"), Spent::default());
        book.charge(&roots, 0.5, 7);
        assert_eq!(
            book.today(&roots, &none, "m"),
            Spent {
                usd: 0.5,
                tokens: 7
            }
        );
    }

    #[test]
    fn midnight_of_a_day_parses() {
        assert!(day_start("2026-12-03").is_some());
        assert!(day_start("garbage").is_none());
    }
}
