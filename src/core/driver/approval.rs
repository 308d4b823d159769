//! The approval gate of a call: read-only and auto modes decide alone; in
//! review mode a command runs only if a remembered rule or the user allows
//! it, and so does every command in auto mode that would leave the exec
//! sandbox (none on this machine, or the model asks to). What
//! `allow_always` remembers is a command's scope, never a scope that would
//! cover chained commands or code run by a wrapper, and never a way out of
//! the sandbox.

use std::sync::Arc;

use serde_json::Value;

use crate::core::session::Session;
use crate::tools::exec::sandbox::Confinement;
use crate::tools::{ApprovalClass, Tool, ToolContext, ToolEvent};
use crate::vocab::approval::ApprovalMode;
use crate::vocab::bridge::{BridgeOutcome, PermissionChoice, PermissionRequest};
use crate::vocab::event::{Event, ToolStatus, TurnId};
use crate::vocab::tool_call::WaitingFor;

/// What `allow_always` remembers for a command: its program and, when the
/// next word looks like a subcommand, that too (`cargo test`, `git status`).
/// Commands that chain or redirect (`;`, `&&`, `|`, `>`, `$(`, backticks)
/// have no scope: remembering them would allow whatever they chain. A
/// program that runs its arguments as code (a shell, an interpreter, a
/// wrapper such as `env` or `xargs`) is remembered with its whole command
/// line: allowing `sh` or `python` by name would allow anything at all. So
/// is a task runner whose arguments name project code to run (`make build`,
/// `npm run build`, `cargo run`): the project's code is what the agent
/// edits, so `make` or `npm run` by name would allow whatever it writes.
pub fn command_scope(cmd: &str) -> Option<String> {
    const CHAINING: [&str; 9] = [";", "&", "|", ">", "<", "$(", "`", "\n", "\\"];
    if CHAINING.iter().any(|c| cmd.contains(c)) {
        return None;
    }
    let mut words = cmd.split_whitespace();
    let program = words.next()?;
    if runs_its_arguments(program) || runs_project_code(cmd) {
        return Some(cmd.trim().to_string());
    }
    match words.next() {
        Some(sub)
            if sub
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
                && !sub.starts_with('-') =>
        {
            Some(format!("{program} {sub}"))
        }
        _ => Some(program.to_string()),
    }
}

/// Programs whose arguments are commands or code to run.
const RUNS_ITS_ARGUMENTS: [&str; 44] = [
    "sh", "bash", "zsh", "dash", "ksh", "mksh", "fish", "csh", "tcsh", "busybox", "env", "sudo",
    "doas", "su", "xargs", "exec", "eval", "command", "builtin", "nohup", "nice", "ionice", "time",
    "timeout", "watch", "setsid", "chroot", "strace", "ssh", "find", "python", "node", "deno",
    "bun", "perl", "ruby", "php", "lua", "awk", "gawk", "mawk", "npx", "bunx", "pnpx",
];

fn runs_its_arguments(program: &str) -> bool {
    // `FOO=1 cmd` runs `cmd`, whatever it is.
    if program.contains('=') {
        return true;
    }
    // `/usr/bin/python3.12` is `python`.
    let name = program.rsplit('/').next().unwrap_or(program);
    let name = name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
    RUNS_ITS_ARGUMENTS.contains(&name)
}

/// Task runners: a program whose arguments name a target or script of the
/// project (any arguments), or a program with a subcommand that runs one.
const PROJECT_RUNNERS: [&str; 10] = [
    "make", "gmake", "just", "rake", "ninja", "invoke", "tox", "nox", "mage", "task",
];
const PROJECT_RUN_SUBCOMMANDS: [(&str, &str); 19] = [
    ("npm", "run"),
    ("npm", "run-script"),
    ("npm", "exec"),
    ("pnpm", "run"),
    ("pnpm", "exec"),
    ("pnpm", "dlx"),
    ("yarn", "run"),
    ("yarn", "exec"),
    ("yarn", "dlx"),
    ("bun", "run"),
    ("deno", "run"),
    ("deno", "task"),
    ("cargo", "run"),
    ("go", "run"),
    ("dotnet", "run"),
    ("bundle", "exec"),
    ("poetry", "run"),
    ("uv", "run"),
    ("pipenv", "run"),
];

/// Whether a command runs project code named by its arguments, so that
/// only its exact command line may be remembered.
fn runs_project_code(cmd: &str) -> bool {
    let mut words = cmd.split_whitespace();
    let Some(program) = words.next() else {
        return false;
    };
    let name = program.rsplit('/').next().unwrap_or(program);
    if PROJECT_RUNNERS.contains(&name) {
        return true;
    }
    let sub = words.next().unwrap_or_default();
    PROJECT_RUN_SUBCOMMANDS.contains(&(name, sub))
}

/// Whether a remembered scope covers a command: the same program (and
/// subcommand) with any arguments, or, for a program that runs its
/// arguments, the very same command line.
fn scope_covers(scope: &str, cmd: &str) -> bool {
    let Some(own) = command_scope(cmd) else {
        return false;
    };
    let program = own.split_whitespace().next().unwrap_or_default();
    if runs_its_arguments(program) || runs_project_code(&own) {
        return own == scope;
    }
    own == scope || own.starts_with(&format!("{scope} "))
}

/// How an approved call runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Approved {
    /// As configured: in the sandbox, or unconfined with `[sandbox] mode = "off"`.
    AsConfigured,
    /// Outside the sandbox: the user allowed the model's request to leave
    /// it (`with_escalated_permissions`), or allowed the call where there
    /// is no sandbox.
    Unsandboxed,
}

/// The approval gate of one call: how to run it, or the result to record
/// instead.
///
/// Commands ask the user in review mode, and also in auto mode when they
/// would run unconfined against the configuration (no sandbox on this
/// machine) or when the model asks to leave the sandbox
/// (`with_escalated_permissions`).
pub(super) async fn approve(
    tool: &Arc<dyn Tool>,
    args: &Value,
    ctx: &ToolContext,
    session: &Arc<Session>,
    turn_id: &TurnId,
) -> Result<Approved, (ToolStatus, String)> {
    if tool.approval() != ApprovalClass::Execute {
        return Ok(Approved::AsConfigured);
    }
    if let Some(target) = tool.mcp() {
        return super::mcp_approval::approve_mcp(tool, &target, args, ctx, session, turn_id)
            .await
            .map(|()| Approved::AsConfigured);
    }
    let decide = |decision: &str, scope: Option<String>, unsandboxed: bool| {
        session.log.append(Event::ApprovalDecided {
            turn_id: turn_id.clone(),
            call_id: ctx.call_id.clone(),
            decision: decision.to_string(),
            scope,
            unsandboxed,
        });
    };
    let cmd = args.get("cmd").and_then(Value::as_str).unwrap_or_default();
    let confinement = Confinement::plan(&ctx.sandbox, &ctx.workspace.roots());
    // No sandbox although one is configured: every run is unconfined, so
    // every run is the user's call.
    let no_sandbox = match &confinement {
        Confinement::Unavailable(why) => Some(why.clone()),
        _ => None,
    };
    let escalation = confinement.is_sandboxed()
        && args
            .get("with_escalated_permissions")
            .and_then(Value::as_bool)
            == Some(true);
    let allowed = if no_sandbox.is_some() {
        Approved::Unsandboxed
    } else {
        Approved::AsConfigured
    };
    match ctx.mode {
        ApprovalMode::Auto if no_sandbox.is_none() && !escalation => {
            return Ok(Approved::AsConfigured)
        }
        ApprovalMode::ReadOnly => {
            decide("rejected_by_mode", None, false);
            return Err((
                ToolStatus::Rejected,
                "the session is in read-only mode: commands are not run".to_string(),
            ));
        }
        ApprovalMode::Auto | ApprovalMode::Review => {}
    }
    let approvals = session.approvals();
    if approvals.always_reject.iter().any(|s| scope_covers(s, cmd)) {
        decide("rejected_by_rule", command_scope(cmd), false);
        return Err((
            ToolStatus::Rejected,
            format!("the user chose to always reject `{cmd}`-like commands in this session"),
        ));
    }
    // A remembered allow covers runs like the one the user allowed, never
    // a way out of the sandbox.
    if !escalation && approvals.always_allow.iter().any(|s| scope_covers(s, cmd)) {
        decide(
            "allowed_by_rule",
            command_scope(cmd),
            allowed == Approved::Unsandboxed,
        );
        return Ok(allowed);
    }
    // A client that cannot answer is not asked (the bridge says so), and
    // then nothing waits for the user: the editor must not show "waiting
    // for you" for a question nobody will see.
    if ctx.bridge.abilities().request_permission {
        (ctx.emit)(ToolEvent::Waiting(WaitingFor::Permission));
    }
    // Leaving the sandbox is asked for once at a time: nothing to remember.
    let scope = if escalation { None } else { command_scope(cmd) };
    let title = tool.title(args);
    let title = if escalation {
        match args.get("justification").and_then(Value::as_str) {
            Some(why) if !why.trim().is_empty() => {
                format!("{title} outside the sandbox: {}", why.trim())
            }
            _ => format!("{title} outside the sandbox"),
        }
    } else if no_sandbox.is_some() {
        format!("{title} (no sandbox on this machine)")
    } else {
        title
    };
    // What is asked is one run: in the sandbox, or, where the sandbox is
    // missing or the model asked to leave it, outside it (the title says
    // which). An unsandboxed run is never one option beside a sandboxed
    // one: a second request asks for it when the sandbox refuses a
    // command (`exec_command`).
    let text = if cmd.is_empty() {
        None
    } else if escalation {
        Some(format!(
            "$ {cmd}\n\nRuns outside the sandbox: with your full rights and the network."
        ))
    } else if let Some(why) = &no_sandbox {
        Some(format!("$ {cmd}\n\nRuns without a sandbox ({why})."))
    } else {
        Some(format!("$ {cmd}"))
    };
    let request = PermissionRequest {
        session_id: session.id.clone(),
        tool_call_id: ctx.call_id.clone(),
        title,
        kind: tool.kind(),
        raw_input: args.clone(),
        always_scope: scope.clone(),
        text,
        diffs: Vec::new(),
    };
    let allowed = if escalation {
        Approved::Unsandboxed
    } else {
        allowed
    };
    match ctx.bridge.request_permission(request, &ctx.cancel).await {
        BridgeOutcome::Answered(answer) => {
            let choice = answer.choice;
            let remembered = match choice {
                PermissionChoice::AllowAlways | PermissionChoice::RejectAlways => scope.clone(),
                _ => None,
            };
            let approved = allowed;
            decide(
                choice.option_id(),
                remembered.clone(),
                choice.allows() && approved == Approved::Unsandboxed,
            );
            if let Some(scope) = &remembered {
                session.remember(scope, choice.allows());
            }
            if choice.allows() {
                Ok(approved)
            } else {
                let because = answer
                    .reason
                    .map(|r| format!("; they said: {r}"))
                    .unwrap_or_default();
                Err((
                    ToolStatus::Rejected,
                    format!("the user rejected running `{cmd}`{because}"),
                ))
            }
        }
        BridgeOutcome::Cancelled if ctx.cancel.is_cancelled() => {
            decide("cancelled", None, false);
            Err((
                ToolStatus::NotRun,
                "ABORTED_BEFORE_DISPATCH: the turn was cancelled while waiting for permission"
                    .to_string(),
            ))
        }
        BridgeOutcome::Cancelled => {
            decide("dismissed", None, false);
            Err((
                ToolStatus::Rejected,
                format!("the user dismissed the permission request for `{cmd}`"),
            ))
        }
        BridgeOutcome::Unavailable(why) => {
            decide("unavailable", None, false);
            let needs = match (&no_sandbox, escalation) {
                (Some(missing), _) => format!(
                    "the exec sandbox is unavailable here ({missing}), so every command needs the user's approval"
                ),
                (None, true) => "running outside the sandbox needs the user's approval".to_string(),
                (None, false) => "in review mode commands need the user's approval".to_string(),
            };
            Err((
                ToolStatus::Rejected,
                format!("permission to run `{cmd}` could not be asked ({why}); {needs}"),
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_scope_is_the_program_and_its_subcommand() {
        assert_eq!(
            command_scope("cargo test --release").as_deref(),
            Some("cargo test")
        );
        assert_eq!(command_scope("git status").as_deref(), Some("git status"));
        assert_eq!(command_scope("ls -la src").as_deref(), Some("ls"));
        assert_eq!(command_scope("cat src/main.rs").as_deref(), Some("cat"));
        assert_eq!(command_scope("   ").as_deref(), None);
    }

    #[test]
    fn chained_or_redirected_commands_have_no_scope() {
        for cmd in [
            "ls; rm -rf x",
            "ls && rm x",
            "ls | sh",
            "echo x > f",
            "echo $(id)",
            "a\nb",
        ] {
            assert_eq!(command_scope(cmd), None, "{cmd}");
        }
    }

    #[test]
    fn a_scope_covers_the_same_program_and_subcommand_with_other_arguments() {
        assert!(scope_covers("ls", "ls -l"));
        assert!(scope_covers("cargo test", "cargo test -p tandem"));
        assert!(!scope_covers("cargo test", "cargo build"));
        assert!(!scope_covers("cargo test", "cargo test-evil"));
        assert!(!scope_covers("ls", "ls; rm -rf ~"));
    }

    #[test]
    fn programs_that_run_their_arguments_are_scoped_to_the_whole_command() {
        let scope = command_scope("sh -c 'echo hi'").unwrap();
        assert_eq!(scope, "sh -c 'echo hi'");
        assert!(scope_covers(&scope, "sh -c 'echo hi'"));
        assert!(!scope_covers(&scope, "sh -c 'touch pwned'"));
        assert!(!scope_covers(&scope, "sh -c 'echo hi' extra"));
        for (cmd, other) in [
            (
                "/usr/bin/python3.12 build.py",
                "/usr/bin/python3.12 -c 'import os'",
            ),
            ("env", "env sh -c 'rm -rf ~'"),
            ("xargs echo", "xargs rm"),
            ("FOO=1 make", "FOO=1 sh -c 'rm -rf ~'"),
            ("find . -name x", "find . -exec rm {} +"),
        ] {
            let scope = command_scope(cmd).unwrap();
            assert_eq!(scope, cmd);
            assert!(!scope_covers(&scope, other), "{cmd} covers {other}");
        }
    }

    #[test]
    fn task_runners_are_remembered_as_the_exact_command() {
        for (cmd, other) in [
            ("make build", "make clean"),
            ("make", "make install"),
            ("npm run build", "npm run postinstall"),
            ("npm run build", "npm run build -- --evil"),
            ("cargo run --release", "cargo run --bin other"),
            ("go run ./cmd/x", "go run ./cmd/y"),
            ("uv run pytest", "uv run python -c 'x'"),
        ] {
            let scope = command_scope(cmd).unwrap();
            assert_eq!(scope, cmd);
            assert!(scope_covers(&scope, cmd));
            assert!(!scope_covers(&scope, other), "{cmd} covers {other}");
        }
        // A fixed subcommand that names no project script keeps its
        // two-word scope.
        assert_eq!(
            command_scope("npm install left-pad").as_deref(),
            Some("npm install")
        );
        assert_eq!(
            command_scope("cargo test -p x").as_deref(),
            Some("cargo test")
        );
    }
}
