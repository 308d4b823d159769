//! When the sandbox is missing (simulated) every command asks, even in
//! auto mode; where it works, a command the sandbox refused is offered
//! again outside it in a second request, logged as such, and the model can
//! ask for that (`with_escalated_permissions`). `initialize` says which it
//! is.

use serde_json::json;

use super::{
    after_failure, answer_permission, config, decisions, editor_on, option_ids,
    permission_requests, run_one, var_tmp_dir, SIMULATE_UNAVAILABLE,
};
use crate::acp::AcpClient;
use crate::support::client::{Editor, EditorOptions};
use crate::support::model_server::ModelServer;

#[tokio::test]
async fn without_a_sandbox_initialize_says_so_and_auto_mode_asks_before_every_command() {
    let server = ModelServer::start().await;
    let root = var_tmp_dir();
    let outside = var_tmp_dir();
    let (mut editor, init) = editor_on(root.path(), &[(SIMULATE_UNAVAILABLE, "1")]).await;
    let sandbox = &init["result"]["capabilities"]["experimental"]["tandem"]["sandbox"];
    assert_eq!(sandbox["available"], false, "{init}");
    assert!(
        sandbox["reason"].as_str().unwrap().contains("simulated"),
        "{sandbox}"
    );
    let session = editor.new_session(config(&server, "auto", json!({}))).await;
    answer_permission(&mut editor, "allow_once");

    for name in ["first", "second"] {
        let cmd = format!("echo {name} > {}/{name}", outside.path().display());
        let result = run_one(&server, &mut editor, &session, json!({"cmd": cmd})).await;
        assert_eq!(result, "exit code 0");
        // Allowed by the user, it ran unconfined.
        assert!(outside.path().join(name).exists());
    }

    let asked = permission_requests(&editor);
    assert_eq!(asked.len(), 2, "auto mode asked for every command");
    let title = asked[0]["params"]["toolCall"]["title"].as_str().unwrap();
    assert!(title.ends_with("(no sandbox on this machine)"), "{title}");
    // Nothing to lift: there is no sandbox.
    assert!(!option_ids(&asked[0]).contains(&"allow_once_unsandboxed".to_string()));
    let logged = decisions(&editor, &session);
    assert_eq!(logged.len(), 2);
    for decision in &logged {
        assert_eq!(decision["decision"], "allow_once", "{decision}");
        assert_eq!(decision["unsandboxed"], true, "{decision}");
    }
    let stderr = editor.stderr();
    assert_eq!(
        stderr.matches("exec sandbox unavailable").count(),
        1,
        "said once: {stderr}"
    );
}

#[tokio::test]
async fn without_a_sandbox_an_editor_that_cannot_answer_gets_no_command_run() {
    let server = ModelServer::start().await;
    let root = var_tmp_dir();
    let mut editor = Editor::spawn_with(EditorOptions {
        env: vec![(SIMULATE_UNAVAILABLE.to_string(), "1".to_string())],
        ..EditorOptions::default()
    })
    .await;
    editor.initialize(root.path()).await;
    let session = editor.new_session(config(&server, "auto", json!({}))).await;

    let result = run_one(&server, &mut editor, &session, json!({"cmd": "touch ran"})).await;

    assert!(!root.path().join("ran").exists(), "{result}");
    assert!(
        result.contains("the exec sandbox is unavailable here (simulated"),
        "{result}"
    );
}

#[tokio::test]
async fn a_command_the_sandbox_refused_is_offered_again_outside_it_in_a_second_request() {
    if !super::kernel_can_sandbox() {
        return;
    }
    let server = ModelServer::start().await;
    let root = var_tmp_dir();
    let outside = var_tmp_dir();
    let (mut editor, init) = editor_on(root.path(), &[]).await;
    let sandbox = &init["result"]["capabilities"]["experimental"]["tandem"]["sandbox"];
    assert_eq!(sandbox["available"], true, "{init}");
    assert!(sandbox["landlockAbi"].as_i64().unwrap() >= 1, "{sandbox}");
    assert_eq!(sandbox["networkIsolation"], true, "{sandbox}");
    let session = editor
        .new_session(config(&server, "review", json!({})))
        .await;

    answer_permission(&mut editor, "allow_once");
    let free = outside.path().join("free");
    let cmd = format!("echo x > {}", free.display());
    let result = run_one(&server, &mut editor, &session, json!({"cmd": cmd})).await;
    assert!(free.exists(), "{result}");
    assert!(
        result.starts_with("[sandbox] the sandbox refused the first run (write outside"),
        "{result}"
    );

    let asked = permission_requests(&editor);
    assert_eq!(
        asked.len(),
        2,
        "one request for the run, one to leave the sandbox"
    );
    // The first asks for the sandboxed run only.
    assert_eq!(option_ids(&asked[0]), ["allow_once", "reject_once"]);
    // The second says why, and offers one run outside the sandbox.
    let second = &asked[1]["params"];
    assert_eq!(option_ids(&asked[1]), ["allow_once", "reject_once"]);
    let title = second["toolCall"]["title"].as_str().unwrap();
    assert!(
        title.contains("outside the sandbox? The sandbox refused it"),
        "{title}"
    );
    let why = second["toolCall"]["content"][0]["content"]["text"]
        .as_str()
        .unwrap();
    assert!(
        why.contains("The sandbox refused it: write outside"),
        "{why}"
    );
    assert!(why.contains(&free.display().to_string()), "{why}");

    let logged = decisions(&editor, &session);
    assert_eq!(logged.len(), 2);
    assert_eq!(logged[0]["decision"], "allow_once");
    assert!(logged[0].get("unsandboxed").is_none(), "{}", logged[0]);
    assert_eq!(logged[1]["decision"], "allow_once");
    assert_eq!(logged[1]["unsandboxed"], true);

    // Declined, the command stays refused, and the model is told so.
    editor.on_request(|method, params| {
        let second = params["toolCall"]["title"]
            .as_str()
            .is_some_and(|t| t.contains("The sandbox refused it"));
        let choice = if second { "reject_once" } else { "allow_once" };
        (method == "tandem/requestPermission")
            .then(|| json!({"outcome": {"outcome": "selected", "optionId": choice}}))
    });
    let confined = outside.path().join("confined");
    let cmd = format!("echo x > {}", confined.display());
    let result = run_one(&server, &mut editor, &session, json!({"cmd": cmd})).await;
    assert!(!confined.exists(), "{result}");
    assert!(
        after_failure(&result).starts_with(
            "[sandbox] the user declined to run it outside the sandbox\n[sandbox] write outside"
        ),
        "{result}"
    );
    assert_eq!(decisions(&editor, &session)[3]["decision"], "reject_once");
}

#[tokio::test]
async fn a_model_asking_to_leave_the_sandbox_asks_the_user_even_in_auto_mode() {
    if !super::kernel_can_sandbox() {
        return;
    }
    let server = ModelServer::start().await;
    let root = var_tmp_dir();
    let outside = var_tmp_dir();
    let (mut editor, _) = editor_on(root.path(), &[]).await;
    let session = editor.new_session(config(&server, "auto", json!({}))).await;
    answer_permission(&mut editor, "allow_once");

    let result = run_one(&server, &mut editor, &session, json!({"cmd": "echo plain"})).await;
    assert_eq!(result, "exit code 0\nplain\n");
    assert!(
        permission_requests(&editor).is_empty(),
        "auto mode runs sandboxed commands unasked"
    );

    let target = outside.path().join("escalated");
    let args = json!({
        "cmd": format!("echo x > {}", target.display()),
        "with_escalated_permissions": true,
        "justification": "writes the shared cache",
    });
    let result = run_one(&server, &mut editor, &session, args).await;
    assert_eq!(result, "exit code 0");
    assert!(target.exists());

    let asked = permission_requests(&editor);
    assert_eq!(asked.len(), 1);
    let title = asked[0]["params"]["toolCall"]["title"].as_str().unwrap();
    assert!(
        title.ends_with("outside the sandbox: writes the shared cache"),
        "{title}"
    );
    // Leaving the sandbox is granted once at a time: no "always", and
    // "allow" is the run outside (the request is about nothing else).
    assert_eq!(option_ids(&asked[0]), ["allow_once", "reject_once"]);
    let logged = decisions(&editor, &session);
    assert_eq!(logged[0]["decision"], "allow_once");
    assert_eq!(logged[0]["unsandboxed"], true);

    // Rejected, it does not run at all.
    answer_permission(&mut editor, "reject_once");
    let kept = outside.path().join("kept-in");
    let args = json!({
        "cmd": format!("echo x > {}", kept.display()),
        "with_escalated_permissions": true,
    });
    let result = run_one(&server, &mut editor, &session, args).await;
    assert!(!kept.exists(), "{result}");
    assert!(result.contains("the user rejected running"), "{result}");
}

#[tokio::test]
async fn the_acp_initialize_answer_carries_the_sandbox_in_meta() {
    if !super::kernel_can_sandbox() {
        return;
    }
    let server = ModelServer::start().await;
    let mut client = AcpClient::spawn(&["acp"], &server).await;
    let (init, _) = client
        .request(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {}}),
            "",
        )
        .await;
    let sandbox = &init["result"]["agentCapabilities"]["_meta"]["tandem"]["sandbox"];
    assert_eq!(sandbox["available"], true, "{init}");
    assert_eq!(sandbox["networkIsolation"], true, "{init}");
}
