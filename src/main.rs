//! The `tandem` binary: picks a frontend and runs it.
//!
//! stdout carries protocol frames only; every log line goes to stderr.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use tokio::io::AsyncReadExt;

use tandem::config::tandem_home;
use tandem::core::log::Durability;
use tandem::frontend::lsp::{self, LspEnd};

#[derive(Parser)]
#[command(name = "tandem", version, about = "An agent daemon for code editors")]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the Language Server Protocol with tandem's extensions on stdio.
    Lsp {
        /// Relay to the user's `tandem serve` (starting it if none runs)
        /// instead of running the agent in this process: the turns survive
        /// the editor window.
        #[arg(long)]
        attach: bool,
        /// Accepted and ignored: stdio is the only transport. Language
        /// clients (vscode-languageclient among them) add it on their own.
        #[arg(long, hide = true)]
        stdio: bool,
    },
    /// Run one daemon for all of the user's editor windows: a WebSocket
    /// server on 127.0.0.1 (port, pid and token in $TANDEM_HOME/serve.json).
    Serve {
        /// Ask the running serve to stop, and wait until it has.
        #[arg(long, conflicts_with = "status")]
        stop: bool,
        /// Say whether a serve runs, where, and with how many clients.
        #[arg(long)]
        status: bool,
        /// Listen on this address instead of 127.0.0.1 (refused: it needs
        /// TLS, which this build does not configure).
        #[arg(long)]
        listen: Option<String>,
    },
    /// Serve the Agent Client Protocol (newline-delimited JSON-RPC) on stdio.
    Acp {
        /// Relay to the user's `tandem serve` (starting it if none runs).
        #[arg(long)]
        attach: bool,
    },
    /// Run one task headless: the answer streams to stdout, tool activity
    /// to stderr; the exit status follows the stop reason (0 done, 1 error,
    /// 2 other stops, 130 cancelled).
    Exec {
        /// What to do.
        task: String,
        /// A file to attach (read from disk).
        #[arg(long)]
        file: Option<std::path::PathBuf>,
        /// Only these lines of --file, `L1:L2` (1-based, inclusive).
        #[arg(long, requires = "file")]
        range: Option<String>,
        /// Approval mode: read-only, review (commands and edits are refused:
        /// there is no editor to ask) or auto.
        #[arg(long)]
        mode: Option<String>,
    },
    /// Check what works on this machine — the model server, the exec
    /// sandbox, the config files, $TANDEM_HOME, the editors — with a fix
    /// for each problem; exit status 1 when something is broken.
    Doctor {
        /// Print one JSON object (for programs) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// The MCP servers of the configuration: list them with their tools,
    /// or call one tool (a configured name or an http(s):// URL).
    Mcp {
        #[command(subcommand)]
        command: tandem::frontend::mcp_cli::McpCommand,
    },
    /// List the sessions in $TANDEM_HOME/sessions, newest first.
    Sessions,
    /// Print a session's trajectory: turns, steps, tool calls with their
    /// results, stop reasons and usage.
    Replay {
        /// The session id (see `tandem sessions`).
        session_id: String,
        /// Print tool output, answers and prompts whole.
        #[arg(long)]
        full: bool,
        /// Print one JSON object per line (the log's vocabulary) for tools.
        #[arg(long)]
        json: bool,
        /// Only this turn (`3` or `t3`).
        #[arg(long, value_name = "N")]
        turn: Option<String>,
        /// Print the file ledger: the files read and edited, at which step.
        #[arg(long, conflicts_with_all = ["json", "turn", "full"])]
        files: bool,
        /// List the checkpoints: what each turn changed and can be rewound to.
        #[arg(long, conflicts_with_all = ["json", "turn", "full", "files"])]
        checkpoints: bool,
    },
}

async fn exec(
    task: String,
    file: Option<std::path::PathBuf>,
    range: Option<String>,
    mode: Option<String>,
) -> ExitCode {
    use tandem::frontend::exec;
    let range = match range.as_deref().map(exec::parse_range).transpose() {
        Ok(range) => range,
        Err(e) => {
            eprintln!("tandem: {e}");
            return ExitCode::from(2);
        }
    };
    if let Some(Err(e)) = mode
        .as_deref()
        .map(str::parse::<tandem::vocab::approval::ApprovalMode>)
    {
        eprintln!("tandem: --mode {e}");
        return ExitCode::from(2);
    }
    let workspace = std::env::current_dir().unwrap_or_else(|_| std::path::PathBuf::from("."));
    let code = exec::run(exec::ExecTask {
        task,
        file,
        range,
        mode,
        home: home(),
        workspace,
        durability: durability(),
    })
    .await;
    ExitCode::from(code)
}

async fn doctor(json: bool) -> ExitCode {
    use tandem::frontend::doctor;
    let workspace = std::env::current_dir().unwrap_or_else(|_| std::path::PathBuf::from("."));
    ExitCode::from(
        doctor::run(doctor::DoctorOptions {
            home: home(),
            workspace,
            json,
        })
        .await,
    )
}

fn list_sessions() -> ExitCode {
    let dir = home().join("sessions");
    let sessions = tandem::core::history::list_session_logs(&dir, &Default::default());
    if sessions.is_empty() {
        println!("no sessions in {}", dir.display());
    }
    for s in sessions {
        println!(
            "{}  {:<11}  {:>3} turns  {}  {}",
            s.session_id, s.state, s.turn_count, s.updated, s.title
        );
    }
    ExitCode::SUCCESS
}

fn replay(
    session_id: &str,
    full: bool,
    json: bool,
    (files, checkpoints): (bool, bool),
    turn: Option<String>,
) -> ExitCode {
    use tandem::core::history::{replay_session, ReplayFormat, ReplayOptions};
    let format = if checkpoints {
        ReplayFormat::Checkpoints
    } else if files {
        ReplayFormat::Files
    } else if json {
        ReplayFormat::Json
    } else {
        ReplayFormat::Text
    };
    let options = ReplayOptions { full, turn };
    let dir = home().join("sessions");
    match replay_session(&dir, session_id, &options, format) {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("tandem: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `$TANDEM_HOME` (see `tandem_home`); without one, the process ends
/// here with the reason, before anything is written anywhere.
fn home() -> std::path::PathBuf {
    tandem_home().unwrap_or_else(|e| {
        eprintln!("tandem: {e}");
        std::process::exit(2)
    })
}

/// Logs go to stderr and to `$TANDEM_HOME/logs/tandem.log`; never to
/// stdout, which carries protocol frames only.
fn init_tracing() {
    use tracing_subscriber::fmt::writer::MakeWriterExt;
    let filter = tracing_subscriber::EnvFilter::try_from_env("TANDEM_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let dir = home().join("logs");
    let file = std::fs::create_dir_all(&dir).and_then(|_| {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("tandem.log"))
    });
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false);
    match file {
        Ok(file) => builder
            .with_writer(std::io::stderr.and(std::sync::Mutex::new(file)))
            .init(),
        Err(e) => {
            builder.with_writer(std::io::stderr).init();
            tracing::warn!("cannot open the log file in {}: {e}", dir.display());
        }
    }
}

/// `tandem doctor` reports on stdout what the log would say, and must not
/// create `TANDEM_HOME` (a log file would) before it checks it; `tandem
/// mcp` prints the servers' failures itself (the SDK's own error lines
/// would say them twice): errors only, to stderr, unless `TANDEM_LOG` asks
/// for more.
fn init_report_tracing(default: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("TANDEM_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false)
        .with_writer(std::io::stderr)
        .init();
}

fn durability() -> Durability {
    match std::env::var("TANDEM_FSYNC").as_deref() {
        Ok("0") | Ok("false") => Durability::Flush,
        _ => Durability::Fsync,
    }
}

async fn serve_lsp<R>(stdin: R) -> ExitCode
where
    R: tokio::io::AsyncRead + Unpin + Send + 'static,
{
    match lsp::serve(stdin, home(), durability()).await {
        LspEnd::Clean => ExitCode::SUCCESS,
        LspEnd::ExitWithoutShutdown => ExitCode::from(1),
    }
}

async fn serve_acp<R>(stdin: R) -> ExitCode
where
    R: tokio::io::AsyncRead + Unpin + Send + 'static,
{
    tandem::frontend::acp::serve(stdin, home(), durability()).await;
    ExitCode::SUCCESS
}

async fn serve(stop: bool, status: bool, listen: Option<String>) -> ExitCode {
    use tandem::frontend::serve;
    if let Some(address) = listen {
        eprintln!(
            "tandem serve: --listen {address} refused: serving beyond 127.0.0.1 needs TLS, \
             which this build does not configure"
        );
        return ExitCode::from(2);
    }
    let code = if stop {
        serve::stop(home()).await
    } else if status {
        serve::status(home()).await
    } else {
        serve::run(home(), durability()).await
    };
    ExitCode::from(code)
}

/// With no subcommand: read the first bytes and pick the framing.
async fn autodetect() -> ExitCode {
    let mut stdin = tokio::io::stdin();
    let mut prefix = Vec::new();
    let mut byte = [0u8; 1];
    loop {
        match stdin.read(&mut byte).await {
            Ok(0) => return ExitCode::SUCCESS,
            Ok(_) => {
                prefix.push(byte[0]);
                if !byte[0].is_ascii_whitespace() {
                    break;
                }
            }
            Err(e) => {
                tracing::error!("cannot read stdin: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    if prefix.last() == Some(&b'{') {
        return serve_acp(std::io::Cursor::new(prefix).chain(stdin)).await;
    }
    serve_lsp(std::io::Cursor::new(prefix).chain(stdin)).await
}

/// The runtime a command runs on. `tandem serve`, `tandem lsp` and
/// `tandem acp` on stdio run on one thread: a streamed chunk goes from the
/// model's socket through the log into the editor's pipe (or the
/// serve's tunnel) with no second worker woken on the way (a
/// cross-thread wake-up a chunk was most of what the serve path cost, and
/// of what stdio cost with its stdout writer a task: BENCHMARKS.md §9,
/// §1). What blocks (tools, loading a log) runs on the blocking pool, as
/// everywhere; sessions interleave on the one thread.
fn runtime_for(command: &Option<Command>) -> std::io::Result<tokio::runtime::Runtime> {
    let mut builder = match command {
        // `TANDEM_SERVE_RUNTIME=multi`: tokio's worker pool instead, for
        // benches/serve_fsync.rs's comparison.
        Some(Command::Serve {
            stop: false,
            status: false,
            ..
        }) if std::env::var("TANDEM_SERVE_RUNTIME").as_deref() != Ok("multi") => {
            tokio::runtime::Builder::new_current_thread()
        }
        // `TANDEM_STDIO_RUNTIME=multi`: the same, for benches/chunk_latency.rs.
        Some(Command::Lsp { attach: false, .. } | Command::Acp { attach: false }) | None
            if std::env::var("TANDEM_STDIO_RUNTIME").as_deref() != Ok("multi") =>
        {
            tokio::runtime::Builder::new_current_thread()
        }
        _ => tokio::runtime::Builder::new_multi_thread(),
    };
    builder.enable_all().build()
}

fn main() -> ExitCode {
    // Before any thread starts (the runtime's, the blocking pool's).
    tandem::frontend::use_one_heap();
    let cli = Cli::parse();
    match cli.command {
        Some(Command::Doctor { .. }) => init_report_tracing("error"),
        Some(Command::Mcp { .. }) => init_report_tracing("error,rmcp=off"),
        _ => init_tracing(),
    }
    let runtime = match runtime_for(&cli.command) {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("tandem: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let code = runtime.block_on(async {
        match cli.command {
            Some(Command::Lsp { attach: false, .. }) => {
                serve_lsp(tandem::frontend::stdin_reader()).await
            }
            Some(Command::Lsp { attach: true, .. }) => ExitCode::from(
                tandem::frontend::serve::pipe::run(
                    &home(),
                    tandem::frontend::serve::tunnel::Protocol::Lsp,
                )
                .await,
            ),
            Some(Command::Serve {
                stop,
                status,
                listen,
            }) => serve(stop, status, listen).await,
            Some(Command::Acp { attach: false }) => serve_acp(tokio::io::stdin()).await,
            Some(Command::Acp { attach: true }) => ExitCode::from(
                tandem::frontend::serve::pipe::run(
                    &home(),
                    tandem::frontend::serve::tunnel::Protocol::Acp,
                )
                .await,
            ),
            Some(Command::Exec {
                task,
                file,
                range,
                mode,
            }) => exec(task, file, range, mode).await,
            Some(Command::Doctor { json }) => doctor(json).await,
            Some(Command::Mcp { command }) => {
                use tandem::frontend::mcp_cli;
                let workspace = std::env::current_dir().unwrap_or_else(|_| ".".into());
                let options = mcp_cli::McpCliOptions {
                    home: home(),
                    workspace,
                };
                ExitCode::from(mcp_cli::run(command, options).await)
            }
            Some(Command::Sessions) => list_sessions(),
            Some(Command::Replay {
                session_id,
                full,
                json,
                turn,
                files,
                checkpoints,
            }) => replay(&session_id, full, json, (files, checkpoints), turn),
            None => autodetect().await,
        }
    });
    // tokio's stdin reader thread may be blocked in read(2); do not wait
    // for it.
    runtime.shutdown_background();
    code
}
