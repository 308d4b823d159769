//! The LSP frontend: tower-lsp's `LspService` behind tandem's own frame
//! reader and writer.
//!
//! ```text
//! stdin ─► FrameReader ─► input loop ─► LspService (a tower Service) ─► response ─┐
//!  (parsed once)   └─ bad frame: error response ──────────────────────────────────┤
//!   session events ─► LspSink ─► tandem/update notification ─────────────────────┤
//!                                                                      Outbound ─► stdout
//! ```
//!
//! Invariant: one writer task owns stdout and writes frames in the order
//! they were queued. A session's updates are queued synchronously as its
//! events are logged, before the driver hands the turn's receipt to the
//! `tandem/prompt` handler — so every update of a turn precedes that turn's
//! response, which is queued once the handler's future has it.

pub mod cancel_request;
pub mod documents;
pub mod framing;
mod input;
pub mod language;
pub mod outgoing;
pub mod progress;
pub mod server;
pub mod tasks;
pub mod workspace_edit;

use std::path::PathBuf;
use std::sync::Arc;

use tokio::io::AsyncRead;
use tokio::sync::Semaphore;

use self::cancel_request::RequestCancels;
use self::framing::encode;
use self::input::Input;
use self::outgoing::Outgoing;
use self::progress::Progress;
use crate::core::client::OneBridge;
use crate::core::daemon::{Daemon, DaemonOptions};
use crate::core::log::{Durability, EventSink, LoggedEvent};
use crate::core::output_budget::OutputBudget;
pub(crate) use crate::frontend::stdout::stdout_writer;
pub use crate::frontend::stdout::OutboundQueue;

/// Turns session events into `tandem/update` notifications (and
/// `$/progress` for running turns).
struct LspSink {
    out: OutboundQueue,
    progress: Arc<Progress>,
}

impl EventSink for LspSink {
    fn on_replay(&self, session_id: &str, event: &LoggedEvent) {
        // History: updates, but no progress for turns long over.
        self.send_update(session_id, event);
    }

    fn on_event(&self, session_id: &str, event: &LoggedEvent) {
        if matches!(event.event, crate::vocab::event::Event::TurnEnd { .. }) {
            // The turn's request bodies are freed; asked before its update
            // is queued, so the writer trims once that is written.
            self.out.trim_when_idle();
        }
        self.progress.on_event(session_id, &event.event);
        self.send_update(session_id, event);
    }

    fn output_budget(&self, _session_id: &str) -> Option<Arc<OutputBudget>> {
        self.out.output_budget()
    }
}

impl LspSink {
    fn send_update(&self, session_id: &str, event: &LoggedEvent) {
        self.out.send_update(session_id, event);
    }
}

/// How the LSP session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LspEnd {
    /// `exit` after `shutdown`, or EOF on stdin.
    Clean,
    /// `exit` without `shutdown` (LSP says: exit code 1).
    ExitWithoutShutdown,
}

/// Serves LSP on stdin and the process's stdout until `exit` or EOF.
pub async fn serve<R>(stdin: R, home: PathBuf, durability: Durability) -> LspEnd
where
    R: AsyncRead + Unpin + Send + 'static,
{
    let connection = Connection::new(stdout_writer(encode));
    let daemon = Daemon::new(DaemonOptions {
        home,
        durability,
        sink: connection.sink(),
    });
    // The one editor of this connection.
    let client = daemon.connect(Arc::new(OneBridge(connection.outgoing.clone())));
    connection.run(daemon, client, stdin, Ending::Daemon).await
}

/// What the end of a connection ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// The daemon with it (stdio: the daemon is this editor's).
    Daemon,
    /// Only the connection (`tandem serve`, on this TCP port: turns run
    /// on for the others).
    Connection { port: u16 },
}

/// One editor's LSP connection: its writer, its requests to the editor
/// and its `$/progress`, made before the daemon it talks to (over stdio
/// the daemon's sink is this connection's) or for a daemon already
/// serving others (`tandem serve`).
pub struct Connection {
    out: OutboundQueue,
    outgoing: Arc<Outgoing>,
    progress: Arc<Progress>,
}

impl Connection {
    /// A connection writing through `out`.
    pub fn new(out: OutboundQueue) -> Connection {
        let outgoing = Outgoing::new(out.clone());
        let progress = Progress::new(out.clone(), outgoing.clone());
        Connection {
            out,
            outgoing,
            progress,
        }
    }

    /// Where this connection hears the sessions it follows.
    pub fn sink(&self) -> Arc<dyn EventSink> {
        Arc::new(LspSink {
            out: self.out.clone(),
            progress: self.progress.clone(),
        })
    }

    /// How this connection's editor is asked (permission, questions,
    /// edits, language requests).
    pub fn bridge(&self) -> Arc<dyn crate::vocab::bridge::ClientBridge> {
        self.outgoing.clone()
    }

    /// Reads `input` until `exit` or its end, as `client` of `daemon`.
    pub async fn run<R>(
        self,
        daemon: Arc<Daemon>,
        client: Arc<crate::core::client::Client>,
        input: R,
        ending: Ending,
    ) -> LspEnd
    where
        R: AsyncRead + Unpin + Send + 'static,
    {
        let Connection {
            out,
            outgoing,
            progress,
        } = self;
        let titled = Arc::downgrade(&daemon);
        progress.set_title_source(Box::new(move |session_id, turn_id| {
            titled
                .upgrade()?
                .session(session_id)
                .ok()?
                .turn_title(turn_id)
        }));
        let shutdown_requested = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (service, socket) = server::build_service(
            daemon.clone(),
            client.clone(),
            shutdown_requested.clone(),
            outgoing.clone(),
            progress.clone(),
            ending,
        );
        let (client_responses, client_requests) =
            input::forward_client_requests(socket, out.clone());
        let in_flight = Arc::new(Semaphore::new(input::MAX_IN_FLIGHT));
        let reader = Input {
            daemon: daemon.clone(),
            client: client.clone(),
            out: out.clone(),
            outgoing: outgoing.clone(),
            progress,
            request_cancels: Arc::new(RequestCancels::default()),
            shutdown_requested,
            service,
            client_responses,
            in_flight: in_flight.clone(),
        };
        let (end, reader) = reader.run(input).await;
        tracing::info!("LSP input ended ({end:?}); closing the connection");
        outgoing.fail_all();
        match ending {
            Ending::Daemon => daemon.shutdown().await,
            // Its turns run on; what it was asked fails.
            Ending::Connection { .. } => daemon.disconnect(&client),
        }
        // Answer what was asked before the end: turns are cancelled by now
        // (stdio), so prompts answer at once; every request in flight
        // holds a permit until its answer is queued. Bounded, in case a
        // handler hangs (a serve's prompt whose turn runs on).
        let all = input::MAX_IN_FLIGHT as u32;
        let drained = tokio::time::timeout(
            std::time::Duration::from_secs(2),
            in_flight.acquire_many(all),
        );
        if drained.await.is_err() && ending == Ending::Daemon {
            tracing::warn!("gave up waiting for in-flight requests at exit");
        }
        client_requests.abort();
        drop(reader);
        out.close().await;
        end
    }
}
