//! The writer of an editor's output, shared by the stdio frontends (LSP
//! and ACP) and the serve's windows: a queue in front of a task of the
//! runtime that writes each frame as it is queued, and the rules for an
//! editor that reads more slowly than the model streams.
//!
//! The writer is a task, not a thread: on the one thread `tandem lsp`,
//! `tandem acp` and `tandem serve` run on, a frame is written as soon as
//! the task that queued it yields, with no thread to wake per frame
//! (BENCHMARKS.md §1). On stdio ([`stdout_writer`]) stdout is written
//! through the reactor when it is a pipe or a socket, the editor's case: a
//! pipe is opened again (`/proc/self/fd/1`) as an open file of our own,
//! made non-blocking without touching the one the editor gave us; a socket
//! (what libuv gives a child) has its one open file made non-blocking
//! while the writer runs and put back before `Close` is said done.
//! Anything else (a file, a terminal) is written by tokio's `Stdout` on the
//! blocking pool, each frame flushed before the next: nothing there can
//! tell what the reader has read, so nothing waits for it, and a hand-off
//! per frame costs no editor anything; no writer thread is kept for it.
//!
//! - Every byte queued is charged to the connection's [`OutputBudget`]
//!   and released once written; above the budget's cap, turns stop
//!   reading the model stream (the core waits), so pending output stays
//!   bounded. Nothing is ever dropped.
//! - Streamed chunks stay events until written, so the chunks that queue
//!   up behind a slow editor merge ([`PendingFrames`]).
//! - Once the editor is known to be slow (more than [`SLOW_FRAMES`]
//!   frames written and unread), a frame is written only when the editor
//!   has read everything before it: the rest waits here, where chunks
//!   merge, instead of in the kernel's pipe, where they cannot. The
//!   editor then reads few, large frames, and a turn's answer is never
//!   more than a frame or two behind its last chunk. When the editor has
//!   read everything by the time the next frame is ready, a few frames in
//!   a row, it is fast again.
//! - A trim asked through a queue ([`OutboundQueue::trim_when_idle`]) is
//!   that queue's writer's: it is asked for once everything queued before
//!   it is written (see `memory`).
//!
//! Invariant: frames are written in the order they were queued.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncWrite;
use tokio::sync::{mpsc, oneshot};

use super::client_pipe::{Backlog, ClientOut};
use super::coalesce::{is_chunk, Pending, PendingFrames, MERGE_BACKLOG};
use super::updates::update_notification;
use crate::core::log::LoggedEvent;
use crate::core::output_budget::{OutputBudget, DEFAULT_OUTPUT_CAP};

/// Frames written and not yet read above which the editor is slow: as
/// many as the backlog behind which chunks merge anyway, so an editor only
/// held up for a moment (a busy machine) is not taken for a slow one.
pub(crate) const SLOW_FRAMES: usize = MERGE_BACKLOG;

/// Frames in a row that the editor had read before the next was ready,
/// after which a slow editor is fast again.
const CAUGHT_UP_FRAMES: usize = 8;

/// Longest wait between two looks at whether a slow editor has read.
const LONGEST_LOOK: Duration = Duration::from_millis(8);

/// What the writer task is asked to do.
pub(crate) enum Outbound {
    /// A JSON-RPC message body to frame and write.
    Frame(Vec<u8>),
    /// A streamed chunk of a session, which may merge with the chunks
    /// after it while the editor is slow to read; charged `charge` bytes.
    Chunk(String, Box<LoggedEvent>, usize),
    /// Write everything queued so far, then stop.
    Close(oneshot::Sender<()>),
    /// Give freed memory back to the OS once everything queued before
    /// this is written (see `memory`).
    Trim,
}

/// How a message body becomes bytes on the wire (LSP: a `Content-Length`
/// header; ACP: a trailing newline).
pub(crate) type Framer = fn(&[u8]) -> Vec<u8>;

/// How a streamed chunk becomes a message body (LSP: `tandem/update`;
/// ACP: `session/update`).
pub(crate) type ChunkBody = fn(&str, &LoggedEvent) -> Option<Vec<u8>>;

/// The queue in front of stdout.
#[derive(Clone)]
pub struct OutboundQueue {
    tx: mpsc::UnboundedSender<Outbound>,
    /// What is queued and not written, for the writer of stdout; `None`
    /// for a queue read by something else.
    budget: Option<Arc<OutputBudget>>,
}

impl OutboundQueue {
    /// The budget of output queued and not written yet, for the sinks to
    /// hand to the core.
    pub(crate) fn output_budget(&self) -> Option<Arc<OutputBudget>> {
        self.budget.clone()
    }

    /// Asks the writer to write what is queued and stop; waits for it.
    pub(crate) async fn close(&self) {
        let (done_tx, done_rx) = oneshot::channel();
        if self.tx.send(Outbound::Close(done_tx)).is_ok() {
            let _ = done_rx.await;
        }
    }

    /// Asks this queue's writer to give freed memory back to the OS once
    /// what is queued now is written (after a session's load, at a turn's
    /// end, after a buffer is closed): the editor this queue writes to is
    /// the one whose replay or turn freed it.
    pub(crate) fn trim_when_idle(&self) {
        let _ = self.tx.send(Outbound::Trim);
    }

    pub fn send_body(&self, body: Vec<u8>) {
        self.charge(body.len());
        if let Err(unsent) = self.tx.send(Outbound::Frame(body)) {
            // The writer stopped (its editor is gone): nothing is owed.
            if let Outbound::Frame(body) = unsent.0 {
                self.release(body.len());
            }
        }
    }

    /// Queues a streamed chunk of `session_id`, to be made a message body
    /// by the writer's [`ChunkBody`] when it is written.
    pub(crate) fn send_chunk(&self, session_id: &str, event: &LoggedEvent) {
        let charge = chunk_charge(session_id, event);
        self.charge(charge);
        let chunk = Outbound::Chunk(session_id.to_string(), Box::new(event.clone()), charge);
        if self.tx.send(chunk).is_err() {
            self.release(charge);
        }
    }

    /// Queues a session's `tandem/update`; a chunk stays mergeable until
    /// written.
    pub fn send_update(&self, session_id: &str, event: &LoggedEvent) {
        if is_chunk(&event.event) {
            self.send_chunk(session_id, event);
        } else if let Some(body) = update_notification(session_id, event) {
            self.send_body(body);
        }
    }

    pub fn send_json(&self, value: &serde_json::Value) {
        match serde_json::to_vec(value) {
            Ok(body) => self.send_body(body),
            Err(e) => tracing::error!("cannot serialize outgoing message: {e}"),
        }
    }

    fn charge(&self, bytes: usize) {
        if let Some(budget) = &self.budget {
            budget.charge(bytes);
        }
    }

    fn release(&self, bytes: usize) {
        if let Some(budget) = &self.budget {
            budget.release(bytes);
        }
    }
}

/// What a queued chunk costs: its strings, and room for the event around
/// them and the message it becomes.
pub(crate) fn chunk_charge(session_id: &str, event: &LoggedEvent) -> usize {
    const AROUND: usize = 256;
    let text = match &event.event {
        crate::vocab::event::Event::AssistantChunk { text, turn_id, .. }
        | crate::vocab::event::Event::ThoughtChunk { text, turn_id, .. } => {
            text.len() + turn_id.len()
        }
        _ => 0,
    };
    AROUND + session_id.len() + event.ts.len() + text
}

/// Starts the writer of the process's stdout and returns the queue in
/// front of it; streamed chunks become `tandem/update` notifications.
pub(crate) fn stdout_writer(frame: Framer) -> OutboundQueue {
    stdout_writer_with(frame, update_notification)
}

/// [`stdout_writer`] with chunks made message bodies by `chunk_body`.
pub(crate) fn stdout_writer_with(frame: Framer, chunk_body: ChunkBody) -> OutboundQueue {
    let gone = tokio_util::sync::CancellationToken::new();
    match ClientOut::stdout().and_then(|watch| Ok((stdout_output()?, watch))) {
        Ok((out, watch)) => task_writer_with(out, watch, frame, chunk_body, gone),
        Err(e) => {
            tracing::error!("cannot open the client's output: {e}");
            // Nothing will be written: nothing is owed, no turn waits.
            let (queue, writer, _) = writer_parts(frame, chunk_body);
            writer.budget.close();
            queue
        }
    }
}

/// Stdout as the writer's output: through the reactor when it is a pipe
/// or a socket, else on the blocking pool (see the module's doc).
fn stdout_output() -> std::io::Result<Box<dyn AsyncWrite + Unpin + Send>> {
    use std::os::fd::AsFd;
    use std::os::unix::fs::FileTypeExt;
    let own = std::fs::File::from(std::io::stdout().as_fd().try_clone_to_owned()?);
    let kind = own.metadata()?.file_type();
    let reactor = if kind.is_fifo() {
        tokio::net::unix::pipe::OpenOptions::new()
            .open_sender("/proc/self/fd/1")
            .map(|pipe| Box::new(pipe) as Box<dyn AsyncWrite + Unpin + Send>)
    } else if kind.is_socket() {
        NonBlocking::socket(own)
            .map(|socket| Box::new(socket) as Box<dyn AsyncWrite + Unpin + Send>)
    } else {
        return Ok(Box::new(tokio::io::stdout()));
    };
    Ok(reactor.unwrap_or_else(|e| {
        tracing::debug!("stdout written on the blocking pool: {e}");
        Box::new(tokio::io::stdout())
    }))
}

/// Stdout's socket written through the reactor: its open file (shared with
/// whoever gave it to us) is non-blocking while this lives, and gets its
/// flags back after.
struct NonBlocking {
    socket: tokio::net::UnixStream,
    flags: libc::c_int,
}

impl NonBlocking {
    /// `own`: a descriptor of our own on stdout's socket.
    fn socket(own: std::fs::File) -> std::io::Result<NonBlocking> {
        use std::os::fd::{AsRawFd, OwnedFd};
        let fd = own.as_raw_fd();
        // SAFETY: fcntl on a descriptor `own` keeps open.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
        if flags < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let socket = std::os::unix::net::UnixStream::from(OwnedFd::from(own));
        socket.set_nonblocking(true)?;
        match tokio::net::UnixStream::from_std(socket) {
            Ok(socket) => Ok(NonBlocking { socket, flags }),
            Err(e) => {
                // SAFETY: `own` was a duplicate of stdout: the same open
                // file, which fd 1 keeps open.
                unsafe { libc::fcntl(libc::STDOUT_FILENO, libc::F_SETFL, flags) };
                Err(e)
            }
        }
    }
}

impl Drop for NonBlocking {
    fn drop(&mut self) {
        use std::os::fd::AsRawFd;
        // SAFETY: `socket` keeps the descriptor open until after this.
        unsafe { libc::fcntl(self.socket.as_raw_fd(), libc::F_SETFL, self.flags) };
    }
}

impl AsyncWrite for NonBlocking {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.get_mut().socket).poll_write(cx, buf)
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.get_mut().socket).poll_flush(cx)
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.get_mut().socket).poll_shutdown(cx)
    }
}

/// The writer task: `out` is stdout (see [`stdout_writer`]), a serve
/// tunnel's socket or an editor's pipe a shim handed over, `watch` a
/// handle on the same for its unread bytes (see [`Writer::run`]); it
/// stops when `gone` fires.
pub(crate) fn task_writer_with<W>(
    out: W,
    watch: ClientOut,
    frame: Framer,
    chunk_body: ChunkBody,
    gone: tokio_util::sync::CancellationToken,
) -> OutboundQueue
where
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (queue, writer, rx) = writer_parts(frame, chunk_body);
    spawn_writer(writer, rx, out, watch, gone);
    queue
}

/// A queue and the writer that will read it.
fn writer_parts(
    frame: Framer,
    chunk_body: ChunkBody,
) -> (OutboundQueue, Writer, mpsc::UnboundedReceiver<Outbound>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let budget = Arc::new(OutputBudget::new(DEFAULT_OUTPUT_CAP));
    let queue = OutboundQueue {
        tx,
        budget: Some(budget.clone()),
    };
    let writer = Writer {
        frame,
        chunk_body,
        budget,
        closing: AtomicBool::new(false),
        trim: AtomicBool::new(false),
        trims: Arc::new(AtomicUsize::new(0)),
    };
    (queue, writer, rx)
}

fn spawn_writer<W>(
    writer: Writer,
    rx: mpsc::UnboundedReceiver<Outbound>,
    out: W,
    watch: ClientOut,
    gone: tokio_util::sync::CancellationToken,
) where
    W: AsyncWrite + Unpin + Send + 'static,
{
    tokio::spawn(async move {
        // `gone`: the client went away without closing its end (a killed
        // shim whose editor keeps the pipe): what waits is dropped.
        tokio::select! {
            _ = writer.run(rx, out, watch) => {}
            _ = gone.cancelled() => {}
        }
        // Nothing more will be written: no turn may wait for it.
        writer.budget.close();
    });
}

/// What a writer's loop keeps between frames.
#[derive(Default)]
struct LoopState {
    /// What arrived while the editor was behind waits here, with
    /// adjacent chunks of one message merged.
    pending: PendingFrames<Outbound>,
    backlog: Backlog,
    caught_up: usize,
}

/// What to do with the next queued frame.
enum Next {
    Write(Vec<u8>, usize),
    Skip,
    /// `Close`: said done once the output is let go.
    Stop(oneshot::Sender<()>),
}

struct Writer {
    frame: Framer,
    chunk_body: ChunkBody,
    budget: Arc<OutputBudget>,
    /// Set once `Close` is queued: no more waiting for a slow editor.
    closing: AtomicBool,
    /// Set when a `Trim` was taken in: everything queued before it is in
    /// `pending` or written, so the next idle moment comes after it.
    trim: AtomicBool,
    /// Trims asked for so far (tests look).
    trims: Arc<AtomicUsize>,
}

impl Writer {
    /// Writes what is queued to `out`, watching its unread bytes through
    /// `watch` (a handle of its own on the same pipe or socket), until
    /// `Close` or the queue's end.
    async fn run<W>(&self, mut rx: mpsc::UnboundedReceiver<Outbound>, mut out: W, watch: ClientOut)
    where
        W: AsyncWrite + Unpin,
    {
        use tokio::io::AsyncWriteExt;
        let mut state = LoopState::default();
        loop {
            if state.pending.is_empty() {
                self.idle(&mut state.pending);
                match rx.recv().await {
                    Some(item) => self.take(&mut state.pending, item),
                    None => return,
                }
            }
            self.drain(&mut rx, &mut state.pending);
            if state.pending.eager {
                // Slow: write only to an editor that has read everything.
                let read = self
                    .wait_until_read(&watch, &mut rx, &mut state.pending)
                    .await;
                self.caught_up(&mut state, read);
            }
            let (bytes, charge) = match self.next_frame(&mut state.pending) {
                Next::Write(bytes, charge) => (bytes, charge),
                Next::Skip => continue,
                Next::Stop(done) => {
                    // Let go of the output first (a socket gets its flags
                    // back): the process may exit as soon as this is said.
                    drop(out);
                    let _ = done.send(());
                    return;
                }
            };
            // The flush: a frame on the blocking pool (a file, a terminal)
            // is written once it returns; through the reactor, at once.
            let written = match out.write_all(&bytes).await {
                Ok(()) => out.flush().await,
                Err(e) => Err(e),
            };
            if let Err(e) = written {
                tracing::info!("cannot write to the client: {e}");
                return;
            }
            self.wrote(&mut state, &watch, bytes.len(), charge);
        }
    }

    /// Nothing waits: what a burst or a turn allocated is given back.
    fn idle(&self, pending: &mut PendingFrames<Outbound>) {
        // A burst just went out (a replay of a long session), or a load or
        // a turn asked: what they allocated is free now, and the allocator
        // would keep it for good without being asked. (Both are called:
        // each clears its own flag.)
        let burst = pending.release_spare();
        if self.trim.swap(false, Ordering::Relaxed) | burst {
            self.trims.fetch_add(1, Ordering::Relaxed);
            // Off the runtime's threads: a frame queued meanwhile does not
            // wait for it.
            super::memory::return_freed_memory_soon();
        }
    }

    /// A slow editor that had read everything (`read`) counts towards
    /// being fast again.
    fn caught_up(&self, state: &mut LoopState, read: bool) {
        if read {
            state.caught_up += 1;
            if state.caught_up >= CAUGHT_UP_FRAMES {
                tracing::debug!("the editor reads as fast as we write again");
                state.pending.eager = false;
            }
        } else {
            state.caught_up = 0;
        }
    }

    /// The next frame's bytes and what they were charged.
    fn next_frame(&self, pending: &mut PendingFrames<Outbound>) -> Next {
        let Some(next) = pending.pop() else {
            return Next::Skip;
        };
        let (body, charge) = match next {
            Pending::Chunk {
                session,
                event,
                charge,
            } => ((self.chunk_body)(&session, &event), charge),
            Pending::Other(Outbound::Frame(body)) => {
                let charge = body.len();
                (Some(body), charge)
            }
            Pending::Other(Outbound::Chunk(..) | Outbound::Trim) => return Next::Skip,
            Pending::Other(Outbound::Close(done)) => return Next::Stop(done),
        };
        match body {
            Some(body) => Next::Write((self.frame)(&body), charge),
            None => {
                self.budget.release(charge);
                Next::Skip
            }
        }
    }

    /// A frame of `len` bytes charged `charge` is written: released, and
    /// the editor found slow when it left too many frames unread.
    fn wrote(&self, state: &mut LoopState, client: &ClientOut, len: usize, charge: usize) {
        self.budget.release(charge);
        state.backlog.wrote(len);
        if !state.pending.eager && !self.closing.load(Ordering::Relaxed) {
            if let Some(unread) = client.unread() {
                let frames = state.backlog.frames_unread(unread);
                if frames > SLOW_FRAMES {
                    tracing::debug!("the editor reads slowly ({frames} frames, {unread} bytes unread): merging, one frame at a time");
                    let freed = state.pending.make_eager();
                    self.budget.release(freed);
                    state.caught_up = 0;
                }
            }
        }
    }

    /// Waits until the editor has read everything written, taking in what
    /// is queued meanwhile; says whether it had already read it all.
    async fn wait_until_read(
        &self,
        client: &ClientOut,
        rx: &mut mpsc::UnboundedReceiver<Outbound>,
        pending: &mut PendingFrames<Outbound>,
    ) -> bool {
        let mut look = Duration::from_millis(1);
        let mut waited = false;
        // `pending.eager` drops when the queue is closed meanwhile.
        while pending.eager && client.unread().is_some_and(|n| n > 0) {
            if client.reader_gone() {
                // The next write fails and says so.
                break;
            }
            waited = true;
            // No kernel event says "the reader has read it all", so look
            // again soon; more often at first, for an editor only a little
            // behind.
            tokio::time::sleep(look).await;
            look = (look * 2).min(LONGEST_LOOK);
            self.drain(rx, pending);
        }
        !waited
    }

    fn drain(
        &self,
        rx: &mut mpsc::UnboundedReceiver<Outbound>,
        pending: &mut PendingFrames<Outbound>,
    ) {
        while let Ok(item) = rx.try_recv() {
            self.take(pending, item);
        }
    }

    fn take(&self, pending: &mut PendingFrames<Outbound>, item: Outbound) {
        if matches!(item, Outbound::Trim) {
            // Not a frame: it would keep the chunks around it from merging.
            self.trim.store(true, Ordering::Relaxed);
            return;
        }
        if matches!(item, Outbound::Close(_)) {
            // At the end, what is left goes out as fast as the pipe takes
            // it, as from any writer: an editor that stopped reading after
            // `exit` but keeps the pipe open must not keep us waiting.
            pending.eager = false;
            self.closing.store(true, Ordering::Relaxed);
        }
        let freed = pending.push(pending_frame(item));
        if freed > 0 {
            self.budget.release(freed);
        }
    }
}

fn pending_frame(item: Outbound) -> Pending<Outbound> {
    match item {
        Outbound::Chunk(session, event, charge) => Pending::Chunk {
            session,
            event,
            charge,
        },
        other => Pending::Other(other),
    }
}

#[cfg(all(test, target_os = "linux"))]
#[path = "stdout_tests.rs"]
mod tests;
