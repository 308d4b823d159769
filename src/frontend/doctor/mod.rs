//! `tandem doctor`: what works on this machine, and a fix for each problem
//! — the model server (reachable, the model listed, streaming), the exec
//! sandbox and its mechanism, the config files, `TANDEM_HOME`, and the
//! editors' versions. Plain text for people, `--json` for programs; the
//! exit status is 1 when any check failed (warnings do not count).
//!
//! Every check is a [`Check`] with a status; the modules only produce
//! them, this one orders and prints them.

mod config_files;
mod editors;
mod machine;
mod model;

use std::fmt::Write as _;
use std::path::PathBuf;

use serde::Serialize;
use serde_json::json;

/// What `tandem doctor` looks at.
pub struct DoctorOptions {
    /// `$TANDEM_HOME`.
    pub home: PathBuf,
    /// The workspace whose `.tandem/config.toml` is read (the current
    /// directory).
    pub workspace: PathBuf,
    /// Print one JSON object instead of text.
    pub json: bool,
}

/// How one check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Works.
    Ok,
    /// Works, with a caveat the user may want to fix.
    Warn,
    /// Broken: the exit status is 1.
    Fail,
    /// Not applicable or not present (an editor not installed, a config
    /// file that does not exist, a check that needs one that failed).
    Skip,
}

/// One finding.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    /// Stable id for programs, e.g. `model.reachable`.
    pub id: &'static str,
    /// The heading it is printed under.
    pub section: Section,
    pub status: Status,
    /// What was found, in one sentence (more lines for a parser's message).
    pub message: String,
    /// What to do about it, when there is something to do.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

/// The headings, in the order they are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Section {
    ModelServer,
    Sandbox,
    Config,
    State,
    Editors,
}

impl Section {
    fn title(self) -> &'static str {
        match self {
            Section::ModelServer => "model server",
            Section::Sandbox => "exec sandbox",
            Section::Config => "config",
            Section::State => "state",
            Section::Editors => "editors",
        }
    }
}

impl Check {
    fn new(id: &'static str, section: Section, status: Status, message: impl Into<String>) -> Self {
        Check {
            id,
            section,
            status,
            message: message.into(),
            fix: None,
        }
    }

    fn with_fix(mut self, fix: impl Into<String>) -> Self {
        self.fix = Some(fix.into());
        self
    }
}

/// Runs every check, prints the report to stdout, and returns the exit
/// status: 0 when nothing failed, 1 otherwise.
pub async fn run(options: DoctorOptions) -> u8 {
    let files = config_files::check(&options.home, &options.workspace);
    let mut checks = files.checks;
    checks.push(machine::home_writable(&options.home));
    checks.extend(machine::sandbox(&files.config.sandbox));
    checks.extend(model::check(&files.config.model).await);
    checks.extend(editors::check().await);
    // Stable: within a section, in the order the checks ran.
    checks.sort_by_key(|c| c.section);
    let failed = checks.iter().filter(|c| c.status == Status::Fail).count();
    let report = if options.json {
        let value = json!({
            "version": env!("CARGO_PKG_VERSION"),
            "ok": failed == 0,
            "problems": failed,
            "sandbox": super::sandbox_info::sandbox_capability(),
            "checks": checks,
        });
        format!("{value}\n")
    } else {
        render_text(&checks, failed)
    };
    print!("{report}");
    u8::from(failed > 0)
}

/// The report for people: a heading per section, a line per check, the
/// fix beneath each problem, a verdict last.
fn render_text(checks: &[Check], failed: usize) -> String {
    let mut out = format!("tandem doctor {}\n", env!("CARGO_PKG_VERSION"));
    let mut section = None;
    for check in checks {
        if section != Some(check.section) {
            section = Some(check.section);
            let _ = write!(out, "\n{}\n", check.section.title());
        }
        let mark = match check.status {
            Status::Ok => "ok  ",
            Status::Warn => "warn",
            Status::Fail => "FAIL",
            Status::Skip => "-   ",
        };
        let mut lines = check.message.lines();
        let _ = writeln!(out, "  {mark}  {}", lines.next().unwrap_or(""));
        for line in lines {
            let _ = writeln!(out, "        {line}");
        }
        if let Some(fix) = &check.fix {
            let _ = writeln!(out, "        fix: {fix}");
        }
    }
    let warned = checks.iter().filter(|c| c.status == Status::Warn).count();
    let _ = match (failed, warned) {
        (0, 0) => writeln!(out, "\nEverything works."),
        (0, w) => writeln!(out, "\nNothing is broken; {w} warning(s) above."),
        (f, _) => writeln!(out, "\n{f} problem(s) found: see the fixes above."),
    };
    out
}
