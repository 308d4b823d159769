//! `:TandemRewind`: a message picked with vim.ui.select, the summary of
//! what a rewind would do, then the choice; files and conversation back.

use serde_json::json;

use super::harness::{config, run, user_text, Workspace};
use crate::support::model_server::{openai, ModelServer};

#[tokio::test]
async fn tandem_rewind_picks_a_message_shows_the_files_and_rewinds_files_and_conversation() {
    if !super::harness::enabled() {
        return;
    }
    let server = ModelServer::start().await;
    let ws = Workspace::new();
    ws.write("notes.txt", "before\n");
    server.push(openai::text(["Hello."]));
    let patch = "*** Begin Patch\n*** Update File: notes.txt\n@@\n-before\n+after\n*** End Patch";
    let args = json!({ "input": patch }).to_string();
    server.push(openai::tool_calls(&[("call_1", "apply_patch", &args)]));
    server.push(openai::text(["Patched."]));
    server.push(openai::text(["Again."]));
    let got = run(
        &ws,
        &config(&server, "auto"),
        r#"
T.setup()
vim.cmd('TandemPrompt say hello')
T.turn(1)
vim.cmd('TandemPrompt patch the notes')
T.turn(2)
T.put('patched', table.concat(vim.fn.readfile(T.path('notes.txt')), '\n'))
local asked = {}
vim.ui.select = function(items, opts, on_choice)
  local shown = vim.tbl_map(opts.format_item, items)
  table.insert(asked, { kind = opts.kind, items = shown })
  if opts.kind == 'tandem.rewind.message' then
    for i, text in ipairs(shown) do
      if text:find('patch the notes', 1, true) then
        return on_choice(items[i])
      end
    end
  else
    T.put('summary', T.lines(vim.fn.bufnr('tandem://rewind')))
    return on_choice(items[1])
  end
end
local n = #T.events
vim.cmd('TandemRewind')
local rewound = T.event('TandemRewound', n)
T.put('asked', asked)
T.put('result', rewound.data)
T.put('after', table.concat(vim.fn.readfile(T.path('notes.txt')), '\n'))
T.put('final', T.lines(vim.fn.bufnr('tandem://rewind')))
T.wait(function()
  return T.chat_text():find('out of the model', 1, true) ~= nil
end, 'the rewound note')
local chat = vim.fn.bufnr('tandem://chat')
local marked = {}
local ns = vim.api.nvim_create_namespace('tandem_rewound')
for _, m in ipairs(vim.api.nvim_buf_get_extmarks(chat, ns, 0, -1, { details = true })) do
  table.insert(marked, vim.api.nvim_buf_get_lines(chat, m[2], m[2] + 1, false)[1] .. m[4].virt_text[1][1])
end
T.put('marked', marked)
T.put('chat', T.chat_lines())
vim.cmd('TandemPrompt next try')
T.turn(3)
-- A redo of the conversation rewind takes the mark off.
local redone
require('tandem.client').request('tandem/rewind', {
  sessionId = require('tandem.session').id(),
  toMessageId = 'rw1',
  files = false,
  conversation = true,
}, function(err, result)
  redone = err or result
end)
T.wait(function()
  return redone ~= nil and T.chat_text():find('rw1 redone', 1, true) ~= nil
end, 'the redo')
T.put('redone', redone)
T.put('marks_after_redo', #vim.api.nvim_buf_get_extmarks(chat, ns, 0, -1, {}))
"#,
    )
    .await;
    assert_eq!(got.get("patched"), "after");
    let asked = got.get("asked").as_array().unwrap();
    assert_eq!(asked[0]["kind"], "tandem.rewind.message");
    assert_eq!(asked[0]["items"], json!(["say hello", "patch the notes"]));
    assert_eq!(asked[1]["kind"], "tandem.rewind.what");
    assert_eq!(
        asked[1]["items"],
        json!(["Files and conversation", "Files only", "Conversation only"])
    );
    let summary = got.lines("summary").join("\n");
    assert!(summary.contains("would:"), "{summary}");
    assert!(summary.contains("notes.txt: restore"), "{summary}");
    assert_eq!(got.get("after"), "before");
    assert_eq!(got.get("result")["conversation"], true);
    let final_summary = got.lines("final").join("\n");
    assert!(
        final_summary.contains("notes.txt: restored"),
        "{final_summary}"
    );
    // The chat marks the dropped message, and only it (the `rewound` update).
    assert_eq!(*got.get("marked"), json!(["## patch the notes (rewound)"]));
    let chat = got.lines("chat").join("\n");
    assert!(
        chat.contains("_[rewound (rw1): 1 message(s) out of the model's context]_"),
        "{chat}"
    );
    // The next request ends before the rewound message.
    let requests = server.requests();
    let last = user_text(requests.last().unwrap());
    assert!(
        last.contains("say hello") && last.contains("next try"),
        "{last}"
    );
    assert!(!last.contains("patch the notes"), "{last}");
    assert_eq!(
        got.get("redone")["rewindId"],
        "rw2",
        "{:?}",
        got.get("redone")
    );
    assert_eq!(*got.get("marks_after_redo"), json!(0));
}

/// A file the user changed after the turn is a conflict, shown with its
/// diff; the last choice overwrites it (`force` for that path).
#[tokio::test]
async fn tandem_rewind_shows_a_conflicts_diff_and_overwrites_it_when_chosen() {
    if !super::harness::enabled() {
        return;
    }
    let server = ModelServer::start().await;
    let ws = Workspace::new();
    ws.write("notes.txt", "before\n");
    let patch = "*** Begin Patch\n*** Update File: notes.txt\n@@\n-before\n+after\n*** End Patch";
    let args = json!({ "input": patch }).to_string();
    server.push(openai::tool_calls(&[("call_1", "apply_patch", &args)]));
    server.push(openai::text(["Patched."]));
    let got = run(
        &ws,
        &config(&server, "auto"),
        r#"
T.setup()
vim.cmd('TandemPrompt patch the notes')
T.turn(1)
vim.fn.writefile({ 'after', 'my own line' }, T.path('notes.txt'))
local asked = {}
vim.ui.select = function(items, opts, on_choice)
  local shown = vim.tbl_map(opts.format_item, items)
  table.insert(asked, { kind = opts.kind, items = shown })
  if opts.kind == 'tandem.rewind.message' then
    return on_choice(items[1])
  elseif opts.kind == 'tandem.rewind.what' then
    T.put('summary', T.lines(vim.fn.bufnr('tandem://rewind')))
    return on_choice(items[2])
  else
    return on_choice(items[2])
  end
end
local n = #T.events
vim.cmd('TandemRewind')
local rewound = T.event('TandemRewound', n)
T.put('asked', asked)
T.put('result', rewound.data)
T.put('after', table.concat(vim.fn.readfile(T.path('notes.txt')), '\n'))
"#,
    )
    .await;
    let summary = got.lines("summary").join("\n");
    assert!(summary.contains("notes.txt: conflict"), "{summary}");
    assert!(
        summary.contains("+my own line"),
        "the diff is shown: {summary}"
    );
    let asked = got.get("asked").as_array().unwrap();
    assert_eq!(asked.len(), 3, "{asked:?}");
    assert_eq!(asked[2]["kind"], "tandem.rewind.force");
    assert_eq!(
        asked[2]["items"],
        json!([
            "Leave the 1 file(s) you changed alone",
            "Overwrite them too (your changes are lost)"
        ])
    );
    assert_eq!(got.get("result")["files"][0]["status"], "restored");
    assert_eq!(got.get("after"), "before");
}
