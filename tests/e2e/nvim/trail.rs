//! Titles, `:TandemRename`, `:TandemFork` and `:TandemLocations` (issue
//! 29): the sessions picker shows the titles, a fork is loaded into the
//! chat with the history before the chosen prompt, and the last turn's
//! tool locations fill the quickfix list.

use super::harness::{config, run, user_text, Workspace};
use crate::support::model_server::{openai, ModelServer};

#[tokio::test]
async fn the_picker_shows_titles_a_rename_and_a_fork_loads_into_the_chat() {
    if !super::harness::enabled() {
        return;
    }
    let server = ModelServer::start().await;
    server.push(openai::text(["First answer."]));
    server.push(openai::text(["Second answer."]));
    server.push(openai::text(["Another second answer."]));
    let ws = Workspace::new();
    let settings = config(&server, "read-only");
    let got = run(
        &ws,
        &settings,
        r#"
T.setup()
vim.cmd('TandemPrompt first question')
T.turn(1)
vim.cmd('TandemPrompt second question')
T.turn(2)
local listed = {}
vim.ui.select = function(items, opts, on_choice)
  listed[#listed + 1] = vim.tbl_map(opts.format_item, items)
  on_choice(nil)
end
vim.cmd('TandemSessions')
T.wait(function() return #listed == 1 end, 'the first picker')
local notes = {}
local notify = vim.notify
vim.notify = function(msg, level) notes[#notes + 1] = msg; notify(msg, level) end
vim.cmd('TandemRename Parser work')
T.wait(function() return #notes > 0 end, 'the rename')
vim.cmd('TandemSessions')
T.wait(function() return #listed == 2 end, 'the second picker')
T.put('before', listed[1])
T.put('after', listed[2])
T.put('renamed', { notes[1] })
-- The fork points offered, then a fork before the second prompt.
vim.ui.select = function(items, opts, on_choice)
  listed[#listed + 1] = vim.tbl_map(opts.format_item, items)
  on_choice(items[3])
end
local loaded = #T.events
vim.cmd('TandemFork')
T.event('TandemSessionLoaded', loaded)
T.put('points', listed[3])
T.put('fork', T.chat_lines())
vim.cmd('TandemPrompt another second question')
T.turn(3)
"#,
    )
    .await;
    // The picker lists the session by its title. Its state may still read
    // `running` for the moment between the `turn_end` the test waits for
    // and the log's fsync that ends the turn; the title is what is checked.
    let listed = |line: &str, title: &str| {
        ["idle", "running"]
            .iter()
            .any(|state| line.starts_with(&format!("{title}  ({state}, 2 turns, ")))
    };
    assert!(
        listed(&got.lines("before")[0], "first question"),
        "{:?}",
        got.lines("before")
    );
    assert!(
        listed(&got.lines("after")[0], "Parser work"),
        "{:?}",
        got.lines("after")
    );
    assert!(
        got.text("renamed").contains("Parser work"),
        "{}",
        got.text("renamed")
    );
    assert_eq!(
        got.lines("points"),
        [
            "(the whole session)",
            "before \"first question\" (m1)",
            "before \"second question\" (m2)"
        ]
    );
    let fork = got.text("fork");
    assert!(
        fork.contains("## first question") && fork.contains("First answer."),
        "{fork}"
    );
    assert!(!fork.contains("second question"), "{fork}");
    // The fork goes on from there: the model hears the first turn only.
    let asked = user_text(&server.requests()[2]);
    assert!(asked.contains("first question"), "{asked}");
    assert!(asked.contains("another second question"), "{asked}");
    assert!(!asked.contains("\"second question"), "{asked}");
    assert!(!asked.contains("\nsecond question"), "{asked}");
}

#[tokio::test]
async fn tandem_locations_fills_the_quickfix_list_from_the_last_turn() {
    if !super::harness::enabled() {
        return;
    }
    let server = ModelServer::start().await;
    let ws = Workspace::new();
    ws.write("a.txt", "one\ntwo\nthe needle\n");
    ws.write("b.txt", "no match\n");
    let args = |v: serde_json::Value| v.to_string();
    let (read, grep) = (
        args(serde_json::json!({"path": "a.txt", "offset": 2})),
        args(serde_json::json!({"pattern": "needle"})),
    );
    server.push(openai::tool_calls(&[
        ("c1", "read_file", read.as_str()),
        ("c2", "grep", grep.as_str()),
    ]));
    server.push(openai::text(["Found it."]));
    let settings = config(&server, "read-only");
    let root = ws.root.path().canonicalize().unwrap();
    let got = run(
        &ws,
        &settings,
        r#"
T.setup()
vim.cmd('TandemPrompt where is the needle')
T.turn(1)
vim.cmd('TandemLocations')
T.put('qf', vim.tbl_map(function(i)
  return vim.fn.bufname(i.bufnr) .. ':' .. i.lnum .. ' ' .. i.text
end, vim.fn.getqflist()))
T.put('title', { vim.fn.getqflist({ title = 0 }).title })
"#,
    )
    .await;
    let qf = got.lines("qf");
    assert_eq!(qf.len(), 2, "{qf:?}");
    let a = root.join("a.txt").display().to_string();
    assert_eq!(
        qf[0],
        format!("{a}:2 Read a.txt"),
        "read_file at its offset"
    );
    assert_eq!(qf[1], format!("{a}:3 Grep /needle/"), "grep at its hit");
    assert!(got.text("title").contains("t1"), "{}", got.text("title"));
}
