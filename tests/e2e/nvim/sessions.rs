//! `:TandemSessions`: a later Neovim lists the sessions, loads the chosen
//! one with its history replayed into the chat, and goes on in it.

use super::harness::{config, run, user_text, Workspace};
use crate::support::model_server::{openai, ModelServer};

#[tokio::test]
async fn a_session_is_reopened_with_its_history_in_the_chat() {
    if !super::harness::enabled() {
        return;
    }
    let server = ModelServer::start().await;
    server.push(openai::text(["The answer is 42."]));
    server.push(openai::text(["Still 42."]));
    let ws = Workspace::new();
    let settings = config(&server, "read-only");
    run(
        &ws,
        &settings,
        r#"
T.setup()
vim.cmd('TandemPrompt remember the number')
T.turn(1)
"#,
    )
    .await;
    // A new Neovim on the same TANDEM_HOME.
    let got = run(
        &ws,
        &settings,
        r#"
T.setup()
local listed
vim.ui.select = function(items, opts, on_choice)
  listed = vim.tbl_map(opts.format_item, items)
  on_choice(items[1])
end
vim.cmd('TandemSessions')
T.event('TandemSessionLoaded')
T.put('listed', listed)
T.put('replayed', T.chat_lines())
T.put('replayed_ends', #vim.tbl_filter(function(e) return e.name == 'TandemTurnEnd' end, T.events))
vim.cmd('TandemPrompt and now?')
T.turn(1)
"#,
    )
    .await;
    let listed = got.lines("listed");
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert!(
        listed[0].starts_with("remember the number  (idle, 1 turn, "),
        "{listed:?}"
    );
    let replayed = got.text("replayed");
    assert!(replayed.contains("## remember the number"), "{replayed}");
    assert!(replayed.contains("The answer is 42."), "{replayed}");
    assert!(replayed.contains("[end_turn]"), "{replayed}");
    // The replayed turn end is marked so (T.turn counts live ones only).
    assert_eq!(got.get("replayed_ends"), &serde_json::json!(1));
    // The next prompt continues the loaded session: the model sees its history.
    let asked = user_text(&server.requests()[1]);
    assert!(asked.contains("remember the number"), "{asked}");
    assert!(asked.contains("and now?"), "{asked}");
}
