//! `run_command` end to end with real shells: output, exit, timeouts,
//! cancellation and the killing of whole process groups.

use std::sync::Arc;

use parking_lot::Mutex;
use tokio::io::AsyncReadExt;

use super::*;

fn spec(cmd: &str) -> CommandSpec {
    CommandSpec::new(cmd, std::env::temp_dir())
}

async fn run(spec: CommandSpec) -> CommandOutcome {
    run_command(spec, CancellationToken::new(), |_| {})
        .await
        .expect("command starts")
}

/// A callback that cancels `token` once the output so far contains
/// `marker`, recording everything it saw.
fn cancel_on(
    marker: &'static str,
    token: &CancellationToken,
) -> (impl FnMut(&str) + Send, Arc<Mutex<String>>) {
    let seen = Arc::new(Mutex::new(String::new()));
    let (token, record) = (token.clone(), seen.clone());
    let callback = move |piece: &str| {
        let mut seen = record.lock();
        seen.push_str(piece);
        if seen.contains(marker) {
            token.cancel();
        }
    };
    (callback, seen)
}

/// Whether `pid` still runs user code. A zombie is not alive (its parent
/// may be an init that never reaps), nor is a process already inside the
/// kernel's exit path: the last field of `stat`, the exit code, is set
/// there before the process closes its files, so it is how one sees that
/// a process which just released our pipes is past the point of return.
#[cfg(target_os = "linux")]
fn process_is_alive(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let after_name = stat.rsplit(')').next().unwrap_or_default();
    let mut fields = after_name.split_whitespace();
    let state = fields.next();
    let exit_code = fields.last();
    !matches!(state, Some("Z") | Some("X")) && exit_code == Some("0")
}

#[tokio::test]
async fn stdout_and_stderr_are_both_captured() {
    let outcome = run(spec("echo to-stdout; echo to-stderr >&2")).await;
    assert_eq!(outcome.end, CommandEnd::Exited(0));
    assert!(
        outcome.output.contains("to-stdout\n"),
        "{:?}",
        outcome.output
    );
    assert!(
        outcome.output.contains("to-stderr\n"),
        "{:?}",
        outcome.output
    );
    assert_eq!(outcome.total_bytes, outcome.output.len() as u64);
    assert_eq!(outcome.elided_bytes, 0);
}

#[tokio::test]
async fn nonzero_exit_code_is_reported_to_the_model() {
    let outcome = run(spec("echo failing; exit 3")).await;
    assert_eq!(outcome.end, CommandEnd::Exited(3));
    assert_eq!(outcome.to_model_text(), "exit code 3\nfailing\n");
}

#[tokio::test]
async fn death_by_a_foreign_signal_is_reported_as_signalled() {
    let outcome = run(spec("kill -TERM $$")).await;
    assert_eq!(outcome.end, CommandEnd::Signalled(15));
    assert_eq!(outcome.to_model_text(), "killed by signal 15");
}

#[tokio::test]
async fn output_over_the_cap_keeps_head_and_tail_and_counts_the_elided_bytes() {
    let mut spec = spec("printf BEGIN; head -c 1000 /dev/zero | tr '\\0' x; printf END");
    spec.max_output_bytes = 100;
    let outcome = run(spec).await;

    assert_eq!(outcome.total_bytes, 1008);
    assert_eq!(outcome.elided_bytes, 908);
    let expected = format!(
        "BEGIN{}\n[... 908 bytes elided ...]\n{}END",
        "x".repeat(45),
        "x".repeat(47)
    );
    assert_eq!(outcome.output, expected);
}

#[tokio::test]
async fn output_streams_to_the_callback_while_the_command_still_runs() {
    let cancel = CancellationToken::new();
    let (callback, seen) = cancel_on("first", &cancel);

    let outcome = run_command(spec("echo first; sleep 30; echo never"), cancel, callback)
        .await
        .unwrap();

    // Cancelled rather than exited: "first" reached the callback while
    // the shell was still in `sleep 30`.
    assert_eq!(outcome.end, CommandEnd::Cancelled);
    assert_eq!(seen.lock().as_str(), "first\n");
    assert_eq!(outcome.output, "first\n");
}

#[tokio::test]
async fn timeout_kills_the_command_and_reports_timed_out_promptly() {
    let mut spec = spec("sleep 30");
    spec.timeout = Duration::from_millis(200);
    // Spawned: the future must be Send to run on the daemon's runtime.
    let outcome = tokio::spawn(run_command(spec, CancellationToken::new(), |_| {}))
        .await
        .unwrap()
        .unwrap();

    assert_eq!(outcome.end, CommandEnd::TimedOut);
    assert!(
        outcome.duration < Duration::from_secs(2),
        "{:?}",
        outcome.duration
    );
    assert_eq!(outcome.to_model_text(), "killed after timeout of 200ms");
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn cancel_kills_the_command_and_its_grandchildren_promptly() {
    let cancel = CancellationToken::new();
    let (callback, seen) = cancel_on("\n", &cancel);

    let outcome = run_command(spec("sleep 30 & echo $!; wait"), cancel.clone(), callback)
        .await
        .unwrap();

    assert_eq!(outcome.end, CommandEnd::Cancelled);
    assert_eq!(
        outcome.to_model_text(),
        format!("aborted: cancelled by the user\n{}", outcome.output)
    );
    let grandchild: u32 = seen.lock().trim().parse().unwrap();
    assert!(
        !process_is_alive(grandchild),
        "background sleep {grandchild} survived"
    );
    assert!(
        outcome.duration < Duration::from_secs(2),
        "{:?}",
        outcome.duration
    );
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn background_job_holding_the_pipes_is_killed_once_the_shell_exits() {
    let mut pid = String::new();
    let outcome = run_command(spec("sleep 30 & echo $!"), CancellationToken::new(), |p| {
        pid.push_str(p)
    })
    .await
    .unwrap();

    assert_eq!(outcome.end, CommandEnd::Exited(0));
    let grandchild: u32 = pid.trim().parse().unwrap();
    assert!(
        !process_is_alive(grandchild),
        "background sleep {grandchild} survived"
    );
    assert!(
        outcome.duration < Duration::from_secs(5),
        "{:?}",
        outcome.duration
    );
}

#[tokio::test]
async fn dropping_the_future_kills_the_process_group() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("alive");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    // Every process of the command holds the FIFO's write end (fd 3), so
    // EOF on our read end means they are all gone.
    let mut alive = tokio::net::unix::pipe::OpenOptions::new()
        .open_receiver(&fifo)
        .unwrap();
    let cmd = format!("exec 3>'{}'; sleep 30 & echo started; wait", fifo.display());
    let started = CancellationToken::new();
    let (callback, _) = cancel_on("started", &started);

    tokio::select! {
        outcome = run_command(spec(&cmd), CancellationToken::new(), callback) => {
            panic!("command ended on its own: {outcome:?}")
        }
        _ = started.cancelled() => {} // the run_command future is dropped here
    }

    let mut rest = Vec::new();
    let eof = tokio::time::timeout(Duration::from_secs(5), alive.read_to_end(&mut rest)).await;
    assert!(
        eof.is_ok(),
        "a process of the dropped command still holds the FIFO"
    );
}

#[tokio::test]
async fn already_cancelled_token_never_starts_the_command() {
    let dir = tempfile::tempdir().unwrap();
    let cancel = CancellationToken::new();
    cancel.cancel();

    let outcome = run_command(CommandSpec::new("touch ran", dir.path()), cancel, |_| {})
        .await
        .unwrap();

    assert_eq!(outcome.end, CommandEnd::Cancelled);
    assert!(!dir.path().join("ran").exists());
}

#[tokio::test]
async fn secret_looking_variables_are_scrubbed_unless_allowed() {
    std::env::set_var("TANDEM_EXEC_TEST_FOO_API_KEY", "leaked-key");
    std::env::set_var("tandem_exec_test_lowercase_secret", "leaked-secret");
    std::env::set_var("TANDEM_EXEC_TEST_ALLOWED_TOKEN", "allowed-token");
    std::env::set_var("TANDEM_EXEC_TEST_PLAIN", "plain-value");
    let mut spec = spec("env");
    spec.env_allow = vec!["TANDEM_EXEC_TEST_ALLOWED_TOKEN".to_string()];

    let outcome = run(spec).await;

    let env = outcome.output;
    assert!(!env.contains("leaked"), "{env}");
    assert!(env.contains("TANDEM_EXEC_TEST_ALLOWED_TOKEN=allowed-token\n"));
    assert!(env.contains("TANDEM_EXEC_TEST_PLAIN=plain-value\n"));
    assert!(env.lines().any(|l| l.starts_with("PATH=")), "{env}");
    for set in ["TANDEM=1", "PAGER=cat", "GIT_PAGER=cat", "NO_COLOR=1"] {
        assert!(env.lines().any(|l| l == set), "{set} missing: {env}");
    }
}

#[tokio::test]
async fn command_runs_in_the_given_workdir() {
    let dir = tempfile::tempdir().unwrap();
    let outcome = run(CommandSpec::new("pwd", dir.path())).await;
    let printed = PathBuf::from(outcome.output.trim_end());
    assert_eq!(
        printed.canonicalize().unwrap(),
        dir.path().canonicalize().unwrap()
    );
}

#[tokio::test]
async fn missing_workdir_is_an_error_naming_it() {
    let error = run_command(
        CommandSpec::new("true", "/nonexistent/tandem-exec-test"),
        CancellationToken::new(),
        |_| {},
    )
    .await
    .unwrap_err();
    assert!(
        error.to_string().contains("/nonexistent/tandem-exec-test"),
        "{error}"
    );
}

#[tokio::test]
async fn multibyte_output_split_across_reads_stays_valid_utf8() {
    // An odd prefix and mixed 2/3/4-byte characters, far beyond one read
    // chunk: chunk boundaries are bound to fall inside characters.
    let mut spec = spec("printf a; yes 'é€😀' | head -n 20000");
    spec.max_output_bytes = 1 << 20;
    let mut streamed = String::new();

    let outcome = run_command(spec, CancellationToken::new(), |p| streamed.push_str(p))
        .await
        .unwrap();

    let expected = format!("a{}", "é€😀\n".repeat(20000));
    assert_eq!(outcome.output, expected);
    assert_eq!(streamed, expected);
}

#[test]
fn model_text_formats_timeouts_readably() {
    assert_eq!(format_duration(Duration::from_secs(10)), "10s");
    assert_eq!(format_duration(Duration::from_millis(200)), "200ms");
    assert_eq!(format_duration(Duration::from_millis(1500)), "1.5s");
}
