//! The append-only session log: `sessions/<id>.jsonl`.
//!
//! The first line is a header (`{"tandem_log": 1, ...}`); every further line
//! is one [`LoggedEvent`]: a sequence number, a timestamp and the event.
//!
//! Invariant: an event is written to the file before anyone is told about it
//! (subscribers are called after the write). Every line is handed to the OS
//! before `append` returns, so `kill -9` loses nothing that was logged;
//! durable boundaries (user input, tool results, turn and step boundaries)
//! are also fsynced, so an acknowledged prompt or an executed tool's result
//! survives a power loss too. Chunks are not fsynced.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use super::liveness::process_alive;
use super::output_budget::OutputBudget;
use crate::vocab::event::Event;

/// Version of the on-disk log format written by this daemon.
pub const LOG_VERSION: u32 = 1;

/// The first line of a session log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LogHeader {
    pub tandem_log: u32,
    pub session_id: String,
    pub created: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default)]
    pub workspace: Vec<PathBuf>,
    /// The folder the session was created for, if one was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_folder: Option<PathBuf>,
    /// The session's own configuration overrides, reapplied on load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<serde_json::Value>,
    /// `task` for the session keybinding tasks run in; absent for chats.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
}

/// An event as stored: its place in the log and when it happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoggedEvent {
    pub seq: u64,
    /// RFC 3339 UTC timestamp with milliseconds.
    pub ts: String,
    /// Set on the events crash recovery wrote when it closed what a
    /// stopped daemon left open; absent on everything else.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovered: Option<Recovered>,
    #[serde(flatten)]
    pub event: Event,
}

/// The mark of an event written by crash recovery: where the log stood
/// when the daemon stopped (the last event it wrote), so a reader knows
/// both when the crash happened (at or soon after `after_ts`) and when
/// recovery wrote the event (its own `ts`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Recovered {
    pub after_seq: u64,
    pub after_ts: String,
}

/// Told about every event after it is written, in log order. Called
/// synchronously from the appending task, so implementations must not block
/// (queue the work, e.g. onto the frontend's writer channel).
pub trait EventSink: Send + Sync {
    fn on_event(&self, session_id: &str, event: &LoggedEvent);

    /// An event of a loaded session's history being replayed to the
    /// client: shown the same way, but nothing is running.
    fn on_replay(&self, session_id: &str, event: &LoggedEvent) {
        self.on_event(session_id, event);
    }

    /// The budget of output this sink's client has not read yet, if it
    /// keeps one: a turn waits for room in it before reading more of the
    /// model stream. Asked once per model call, for the session
    /// `session_id` (a sink serving many clients keeps one per session).
    fn output_budget(&self, _session_id: &str) -> Option<Arc<OutputBudget>> {
        None
    }

    /// Client `client` (a [`Client`](crate::core::client::Client)'s id)
    /// follows `session_id` from now on: it made, prompted or forked it. A
    /// sink serving one editor hears every session already; one serving
    /// many (`tandem serve`) sends the session's events to that client's
    /// connection from the next one on.
    fn follow(&self, _client: u64, _session_id: &str) {}

    /// `client` is about to be sent `session_id`'s history: live events
    /// of the session that arrive before [`EventSink::replay`] wait, so
    /// they come after the history, never before or twice.
    fn begin_replay(&self, _client: u64, _session_id: &str) {}

    /// `client` loaded `session_id`, whose log holds `events`: sends them
    /// as a replay (when `send`), then the live events that waited, and
    /// the live ones from then on.
    fn replay(&self, _client: u64, session_id: &str, events: &[LoggedEvent], send: bool) {
        for event in events.iter().filter(|_| send) {
            self.on_replay(session_id, event);
        }
    }

    /// `session_id` was closed in this daemon (`closeSession`, a delete):
    /// its task has ended and its last event is out. A sink that keeps
    /// something per session forgets it; a later load starts over.
    fn closed(&self, _session_id: &str) {}
}

/// A sink that drops everything (headless use, tests).
pub struct NullSink;

impl EventSink for NullSink {
    fn on_event(&self, _session_id: &str, _event: &LoggedEvent) {}
}

/// How hard `append` works to make boundaries durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// Flush and fsync boundaries on append (the default).
    #[default]
    Fsync,
    /// Fsync boundaries too, but on the blocking pool, never on the
    /// appending thread (`tandem serve`, whose one thread streams every
    /// session): a boundary's line is written at once, and the sink hears
    /// of it, and of every event after it, only once the fsync is done, in
    /// log order. What acknowledges an event to a client waits for
    /// [`SessionLog::durable`]. Outside a tokio runtime it is `Fsync`.
    FsyncInBackground,
    /// Flush boundaries to the OS but do not fsync (benchmarks, tmpfs).
    Flush,
}

struct Writer {
    file: BufWriter<File>,
    next_seq: u64,
    /// Set when a write failed; later appends keep going in memory and the
    /// error is reported once.
    failed: bool,
    /// `FsyncInBackground`: events written and not yet told to the sink,
    /// oldest first — a boundary waiting for its fsync, and everything
    /// appended after it (so the sink hears of events in log order).
    held: std::collections::VecDeque<LoggedEvent>,
    /// A blocking task is fsyncing and telling `held`.
    draining: bool,
    /// Every line up to this sequence number is fsynced.
    synced: u64,
}

/// What the background fsync shares with the log.
struct Shared {
    writer: Mutex<Writer>,
    /// The highest sequence number the sink has been told.
    told: tokio::sync::watch::Sender<u64>,
}

/// The log of one session, shared by its driver and its frontends.
pub struct SessionLog {
    session_id: String,
    path: PathBuf,
    durability: Durability,
    shared: Arc<Shared>,
    sink: Arc<dyn EventSink>,
    _lock: SessionLock,
}

impl Shared {
    fn new(file: BufWriter<File>, next_seq: u64) -> Arc<Shared> {
        Arc::new(Shared {
            writer: Mutex::new(Writer {
                file,
                next_seq,
                failed: false,
                held: Default::default(),
                draining: false,
                synced: next_seq - 1,
            }),
            told: tokio::sync::watch::Sender::new(next_seq - 1),
        })
    }

    fn mark_told(&self, seq: u64) {
        self.told.send_modify(|told| *told = (*told).max(seq));
    }

    /// The background half of `FsyncInBackground` (on the blocking pool):
    /// fsyncs what `held` needs, tells the sink what is durable, in order,
    /// until nothing is held.
    fn drain(&self, session_id: &str, sink: &dyn EventSink) {
        loop {
            let (target, file) = {
                let mut writer = self.writer.lock();
                if writer.held.is_empty() {
                    writer.draining = false;
                    return;
                }
                let synced = writer.synced;
                let needs_fsync = writer
                    .held
                    .iter()
                    .any(|e| e.seq > synced && e.event.is_durable_boundary());
                let file = needs_fsync
                    .then(|| writer.file.get_ref().try_clone().ok())
                    .flatten();
                (writer.next_seq - 1, file)
            };
            let synced = file.is_some();
            if let Some(file) = file {
                if let Err(e) = file.sync_data() {
                    tracing::error!(session = %session_id, "session log fsync failed: {e}");
                }
            }
            let told: Vec<LoggedEvent> = {
                let mut writer = self.writer.lock();
                if synced {
                    writer.synced = writer.synced.max(target);
                }
                let ready = writer.held.iter().take_while(|e| e.seq <= target).count();
                writer.held.drain(..ready).collect()
            };
            for event in &told {
                sink.on_event(session_id, event);
                self.mark_told(event.seq);
            }
        }
    }
}

/// Why a log could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error("session log {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "session {session_id} is open in another tandem process (pid {pid}); close it there first"
    )]
    Locked { session_id: String, pid: u32 },
    #[error("session log {path} was written by a newer tandem (log format {found}; this daemon reads up to {LOG_VERSION}); it was not modified")]
    NewerVersion { path: PathBuf, found: u32 },
    #[error("session log {path} is not a tandem log: {message}")]
    NotALog { path: PathBuf, message: String },
}

/// `sessions/<id>.lock`: one writer per session. Holds the owner's pid; a
/// lock whose owner is gone, or a zombie, is stale and taken over (the
/// semantics are [`crate::core::liveness`]'s).
struct SessionLock {
    path: PathBuf,
}

impl SessionLock {
    fn acquire(dir: &Path, session_id: &str) -> Result<SessionLock, LogError> {
        let path = dir.join(format!("{session_id}.lock"));
        for _ in 0..2 {
            match OpenOptions::new().write(true).create_new(true).open(&path) {
                Ok(mut file) => {
                    let _ = write!(file, "{}", std::process::id());
                    return Ok(SessionLock { path });
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    let pid = std::fs::read_to_string(&path)
                        .ok()
                        .and_then(|s| s.trim().parse::<u32>().ok());
                    match pid {
                        Some(pid) if process_alive(pid) => {
                            return Err(LogError::Locked {
                                session_id: session_id.to_string(),
                                pid,
                            })
                        }
                        _ => {
                            tracing::warn!(path = %path.display(), "removing stale session lock");
                            let _ = std::fs::remove_file(&path);
                        }
                    }
                }
                Err(source) => return Err(LogError::Io { path, source }),
            }
        }
        Err(LogError::Io {
            path,
            source: std::io::Error::other("could not take the session lock"),
        })
    }
}

impl Drop for SessionLock {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The pid of the live process holding `<session_id>.lock` in `dir`, if
/// any: a daemon has the session open. A stale lock (its process gone)
/// counts as none.
pub fn lock_owner(dir: &Path, session_id: &str) -> Option<u32> {
    let pid = std::fs::read_to_string(dir.join(format!("{session_id}.lock")))
        .ok()?
        .trim()
        .parse::<u32>()
        .ok()?;
    process_alive(pid).then_some(pid)
}

impl SessionLog {
    /// Creates a new log file with its header. Fails if the file exists.
    pub fn create(
        dir: &Path,
        header: &LogHeader,
        durability: Durability,
        sink: Arc<dyn EventSink>,
    ) -> Result<SessionLog, LogError> {
        let path = dir.join(format!("{}.jsonl", header.session_id));
        let io = |source| LogError::Io {
            path: path.clone(),
            source,
        };
        std::fs::create_dir_all(dir).map_err(io)?;
        let lock = SessionLock::acquire(dir, &header.session_id)?;
        let file = OpenOptions::new()
            .create_new(true)
            .append(true)
            .open(&path)
            .map_err(io)?;
        let mut file = BufWriter::with_capacity(64 * 1024, file);
        let written = serde_json::to_writer(&mut file, header)
            .map_err(std::io::Error::from)
            .and_then(|_| file.write_all(b"\n"))
            .and_then(|_| file.flush())
            .and_then(|_| match durability {
                Durability::Fsync | Durability::FsyncInBackground => file.get_ref().sync_data(),
                Durability::Flush => Ok(()),
            });
        written.map_err(io)?;
        Ok(SessionLog {
            session_id: header.session_id.clone(),
            path,
            durability,
            shared: Shared::new(file, 1),
            sink,
            _lock: lock,
        })
    }

    /// Opens an existing log to continue it: takes the lock, reads it back,
    /// cuts a torn last line off the file so new lines start clean, and
    /// continues the sequence numbers.
    pub fn open(
        path: &Path,
        durability: Durability,
        sink: Arc<dyn EventSink>,
    ) -> Result<(SessionLog, LogHeader, Vec<LoggedEvent>), LogError> {
        let io = |source| LogError::Io {
            path: path.to_path_buf(),
            source,
        };
        let dir = path.parent().unwrap_or(Path::new("."));
        let contents = read_log_contents(path)?;
        let lock = SessionLock::acquire(dir, &contents.header.session_id)?;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(io)?;
        if contents.valid_len < file.metadata().map_err(io)?.len() {
            tracing::warn!(path = %path.display(), "cutting a torn last line off the session log");
            file.set_len(contents.valid_len).map_err(io)?;
        }
        drop(file);
        let file = OpenOptions::new().append(true).open(path).map_err(io)?;
        let next_seq = contents.events.last().map_or(1, |e| e.seq + 1);
        let log = SessionLog {
            session_id: contents.header.session_id.clone(),
            path: path.to_path_buf(),
            durability,
            shared: Shared::new(BufWriter::with_capacity(64 * 1024, file), next_seq),
            sink,
            _lock: lock,
        };
        Ok((log, contents.header, contents.events))
    }

    /// The same log, telling another sink from now on.
    pub fn with_sink(mut self, sink: Arc<dyn EventSink>) -> Self {
        self.sink = sink;
        self
    }

    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Client `client` follows this session from now on (see
    /// [`EventSink::follow`]).
    pub fn follow(&self, client: u64) {
        self.sink.follow(client, &self.session_id);
    }

    /// The output budget of the client this log's events go to, if any.
    pub fn output_budget(&self) -> Option<Arc<OutputBudget>> {
        self.sink.output_budget(&self.session_id)
    }

    /// Appends an event, makes it durable if it is a boundary, then tells
    /// the sink. Returns the stored form.
    pub fn append(&self, event: Event) -> LoggedEvent {
        self.append_marked(event, None)
    }

    /// Appends an event crash recovery synthesized, marked with where the
    /// log stood when the daemon stopped.
    pub fn append_recovered(&self, event: Event, mark: &Recovered) -> LoggedEvent {
        self.append_marked(event, Some(mark.clone()))
    }

    fn append_marked(&self, event: Event, recovered: Option<Recovered>) -> LoggedEvent {
        let durable = event.is_durable_boundary();
        let runtime = match self.durability {
            Durability::FsyncInBackground => tokio::runtime::Handle::try_current().ok(),
            _ => None,
        };
        let fsync_now = durable
            && match self.durability {
                Durability::Fsync => true,
                Durability::FsyncInBackground => runtime.is_none(),
                Durability::Flush => false,
            };
        let (logged, after) = {
            let mut writer = self.shared.writer.lock();
            let logged = LoggedEvent {
                seq: writer.next_seq,
                ts: now_rfc3339(),
                recovered,
                event,
            };
            writer.next_seq += 1;
            if let Err(e) = write_line(&mut writer.file, &logged, fsync_now) {
                if !writer.failed {
                    tracing::error!(session = %self.session_id, path = %self.path.display(), "session log write failed: {e}");
                }
                writer.failed = true;
            }
            // Held back: a boundary until its fsync is done, anything after
            // one until it has been told.
            // While a drain runs, everything waits its turn behind it (an
            // event from a thread outside the runtime too).
            let hold = writer.draining || (durable && runtime.is_some());
            match runtime {
                _ if hold => {
                    writer.held.push_back(logged.clone());
                    let start = !writer.draining;
                    writer.draining = true;
                    (logged, runtime.filter(|_| start))
                }
                _ => {
                    drop(writer);
                    self.sink.on_event(&self.session_id, &logged);
                    self.shared.mark_told(logged.seq);
                    (logged, None)
                }
            }
        };
        if let Some(runtime) = after {
            let (shared, sink) = (self.shared.clone(), self.sink.clone());
            let session_id = self.session_id.clone();
            runtime.spawn_blocking(move || shared.drain(&session_id, sink.as_ref()));
        }
        logged
    }

    /// Waits until every event appended so far is durable (as its
    /// [`Durability`] makes it) and told to the sink. Immediate unless the
    /// log fsyncs in the background; what acknowledges an input to a
    /// client (a steer's answer, a prompt's receipt) waits for this first.
    pub async fn durable(&self) {
        let last = self.shared.writer.lock().next_seq - 1;
        let mut told = self.shared.told.subscribe();
        let _ = told.wait_for(|&told| told >= last).await;
    }

    /// Makes everything appended so far durable (fsync, unless the log was
    /// opened with [`Durability::Flush`]), blocking the caller.
    pub fn sync(&self) {
        if self.durability == Durability::Flush {
            return;
        }
        let writer = self.shared.writer.lock();
        if let Err(e) = writer.file.get_ref().sync_data() {
            tracing::error!(session = %self.session_id, "session log fsync failed: {e}");
        }
    }

    /// [`SessionLog::sync`] for async callers: the fsync runs on the
    /// blocking pool and this waits for it, so the caller's thread keeps
    /// serving other sessions meanwhile (outside a runtime: `sync`).
    pub async fn synced(&self) {
        if self.durability == Durability::Flush {
            return;
        }
        match self.fsync_on_blocking_pool() {
            Some(fsync) => {
                let _ = fsync.await;
            }
            None => self.sync(),
        }
    }

    /// Starts making everything appended so far durable without waiting
    /// for it: the fsync runs on a blocking thread while the caller goes
    /// on (the driver sends the model a batch's results meanwhile). The
    /// next [`SessionLog::sync`] (before another batch of tools runs, at
    /// the turn's end) covers the same bytes, so nothing new happens on
    /// the machine before what came before it is on disk.
    pub fn sync_soon(&self) {
        if self.durability == Durability::Flush {
            return;
        }
        if self.fsync_on_blocking_pool().is_none() {
            self.sync();
        }
    }

    /// An fsync of the log's file on the blocking pool, or `None` outside a
    /// runtime (or when the file cannot be shared), where the caller syncs
    /// inline.
    fn fsync_on_blocking_pool(&self) -> Option<tokio::task::JoinHandle<()>> {
        let runtime = tokio::runtime::Handle::try_current().ok()?;
        let file = self.shared.writer.lock().file.get_ref().try_clone().ok()?;
        let session = self.session_id.clone();
        Some(runtime.spawn_blocking(move || {
            if let Err(e) = file.sync_data() {
                tracing::error!(session = %session, "session log fsync failed: {e}");
            }
        }))
    }
}

fn write_line(
    file: &mut BufWriter<File>,
    logged: &LoggedEvent,
    fsync: bool,
) -> std::io::Result<()> {
    serde_json::to_writer(&mut *file, logged)?;
    file.write_all(b"\n")?;
    // Every line reaches the OS at once (one write; a killed daemon loses
    // nothing it logged); boundaries are also fsynced, so a power loss
    // loses at most streamed chunks.
    file.flush()?;
    if fsync {
        file.get_ref().sync_data()?;
    }
    Ok(())
}

/// The current time as RFC 3339 UTC with milliseconds.
pub fn now_rfc3339() -> String {
    let now = time::OffsetDateTime::now_utc();
    let format = time::macros::format_description!(
        "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z"
    );
    now.format(&format).unwrap_or_default()
}

/// A log file as read back.
pub struct LogContents {
    pub header: LogHeader,
    pub events: Vec<LoggedEvent>,
    /// Bytes up to the end of the last complete, readable line.
    pub valid_len: u64,
    /// Whether the last line was torn (a crash mid-write) and skipped.
    pub torn_tail: bool,
}

/// Reads a log file back: the header and the events, in order. A torn last
/// line is skipped with a warning; a log from a newer format is refused.
pub fn read_log_contents(path: &Path) -> Result<LogContents, LogError> {
    let bytes = std::fs::read(path).map_err(|source| LogError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let not_a_log = |message: String| LogError::NotALog {
        path: path.to_path_buf(),
        message,
    };
    let header_end = bytes
        .iter()
        .position(|&b| b == b'\n')
        .ok_or_else(|| not_a_log("no header line".to_string()))?;
    let header_value: serde_json::Value = serde_json::from_slice(&bytes[..header_end])
        .map_err(|e| not_a_log(format!("bad header: {e}")))?;
    let found = header_value
        .get("tandem_log")
        .and_then(|v| v.as_u64())
        .ok_or_else(|| not_a_log("the header has no `tandem_log` version".to_string()))?
        as u32;
    if found > LOG_VERSION {
        return Err(LogError::NewerVersion {
            path: path.to_path_buf(),
            found,
        });
    }
    let header: LogHeader =
        serde_json::from_value(header_value).map_err(|e| not_a_log(format!("bad header: {e}")))?;
    let mut events = Vec::new();
    let mut offset = header_end + 1;
    let mut valid_len = offset as u64;
    let mut torn_tail = false;
    let mut line_no = 1;
    while offset < bytes.len() {
        line_no += 1;
        let (line, next, complete) = match bytes[offset..].iter().position(|&b| b == b'\n') {
            Some(n) => (&bytes[offset..offset + n], offset + n + 1, true),
            None => (&bytes[offset..], bytes.len(), false),
        };
        match serde_json::from_slice::<LoggedEvent>(line) {
            Ok(event) if complete => {
                events.push(event);
                valid_len = next as u64;
            }
            _ if !complete => {
                tracing::warn!(path = %path.display(), line = line_no, "skipping a torn last line (the daemon stopped mid-write)");
                torn_tail = true;
            }
            Ok(_) => unreachable!("complete lines are handled above"),
            Err(e) => {
                // A complete but unreadable line in the middle: keep going,
                // but never cut the file there.
                tracing::warn!(path = %path.display(), line = line_no, "skipping an unreadable log line: {e}");
                valid_len = next as u64;
            }
        }
        offset = next;
    }
    Ok(LogContents {
        header,
        events,
        valid_len,
        torn_tail,
    })
}

/// Reads a log file back: the header and the events, in order.
pub fn read_log(path: &Path) -> Result<(LogHeader, Vec<LoggedEvent>), LogError> {
    let contents = read_log_contents(path)?;
    Ok((contents.header, contents.events))
}

#[cfg(test)]
#[path = "log_tests.rs"]
mod tests;
