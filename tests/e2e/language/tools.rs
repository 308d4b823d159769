//! `diagnostics`, `definition`, `references` and `workspace_symbols`: the
//! model asks, the editor answers, the model reads numbered lines with
//! their source, from the unsaved buffer.

use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use super::{
    capabilities, config, connect, diagnostic, offered_tools, workspace, write, Wire, ALL,
};
use crate::support::client::file_uri;
use crate::support::model_server::openai::{text, tool_calls};
use crate::support::model_server::ModelServer;

const LANGUAGE_TOOLS: [&str; 4] = [
    "diagnostics",
    "definition",
    "references",
    "workspace_symbols",
];

async fn the_model_reads_the_unsaved_buffers_errors(wire: Wire) {
    let (_dir, root) = workspace();
    let app = write(&root, "app.py", "x = 1\n");
    let server = ModelServer::start().await;
    server.push(tool_calls(&[(
        "call_diag",
        "diagnostics",
        r#"{"paths":["app.py"]}"#,
    )]));
    server.push(text(["seen"]));
    let mut c = connect(wire, &root, capabilities(&ALL)).await;
    let methods = &c.init["result"]["capabilities"]["experimental"]["tandem"]["methods"];
    assert!(
        methods
            .as_array()
            .is_some_and(|m| m.contains(&json!("tandem/diagnosticsChanged"))),
        "{methods}"
    );
    let asked = Arc::new(Mutex::new(Vec::new()));
    let record = asked.clone();
    let uri = file_uri(&app);
    c.editor.on_request(move |method, params| {
        (method == "tandem/diagnostics").then(|| {
            record.lock().unwrap().push(params.clone());
            json!({"files": [{"uri": uri, "version": 2, "diagnostics": [
                diagnostic(1, 6, 7, 1, "\"y\" is not defined"),
                diagnostic(0, 0, 1, 4, "a hint nobody needs"),
            ]}]})
        })
    });
    // The buffer holds text the disk does not.
    c.editor.open(&app, "x = 1\nprint(y)\n").await;
    let session = c
        .editor
        .new_session(config(&server, "auto", json!({})))
        .await;
    let (receipt, _) = c.editor.prompt(&session, "any errors?").await;
    assert_eq!(receipt["result"]["stopReason"], "end_turn", "{receipt}");

    let requests = server.wait_for_requests(2).await;
    let offered = offered_tools(&requests[0].body);
    for tool in LANGUAGE_TOOLS {
        assert!(
            offered.contains(&tool.to_string()),
            "{tool} not in {offered:?}"
        );
    }
    assert_eq!(
        requests[1].tool_messages()[0].1,
        "1 error:\n\
         app.py:2:7: error: \"y\" is not defined (Pyright reportUndefinedVariable)\n     2\tprint(y)\n\
         (1 hints not shown)"
    );
    assert_eq!(
        *asked.lock().unwrap(),
        vec![json!({"uris": [file_uri(&app)]})]
    );
}

#[tokio::test]
async fn diagnostics_gives_the_model_the_unsaved_buffers_errors_over_stdio() {
    the_model_reads_the_unsaved_buffers_errors(Wire::Stdio).await;
}

#[tokio::test]
async fn diagnostics_gives_the_model_the_unsaved_buffers_errors_through_the_serve() {
    the_model_reads_the_unsaved_buffers_errors(Wire::Serve).await;
}

/// A line whose columns differ in characters and UTF-16 units.
const LIB: &str =
    "def greet(name):\n    return name\n\nmsg = \"h\u{e9}llo\u{1F600}\"; greet(msg)\n";

async fn definition_and_references_are_the_editors_locations(wire: Wire) {
    let (_dir, root) = workspace();
    let lib = write(&root, "lib.py", LIB);
    let server = ModelServer::start().await;
    server.push(tool_calls(&[
        (
            "call_def",
            "definition",
            r#"{"path":"lib.py","line":4,"symbol":"greet"}"#,
        ),
        (
            "call_refs",
            "references",
            r#"{"path":"lib.py","line":1,"column":5}"#,
        ),
        ("call_syms", "workspace_symbols", r#"{"query":"gre"}"#),
    ]));
    server.push(text(["found"]));
    let mut c = connect(wire, &root, capabilities(&["definition", "references"])).await;
    let asked = Arc::new(Mutex::new(Vec::<(String, Value)>::new()));
    let record = asked.clone();
    let uri = file_uri(&lib);
    let at = |line: u32, character: u32| {
        json!({"start": {"line": line, "character": character},
               "end": {"line": line, "character": character + 5}})
    };
    // `greet(msg)` on line 4 starts after `msg = "héllo😀"; `: 16
    // characters, 17 UTF-16 units.
    let call_utf16 = 17;
    let (def_range, call_range) = (at(0, 4), at(3, call_utf16));
    c.editor.on_request(move |method, params| {
        record
            .lock()
            .unwrap()
            .push((method.to_string(), params.clone()));
        match method {
            "tandem/definition" => Some(json!({"locations": [{"uri": uri, "range": def_range}]})),
            "tandem/references" => Some(json!({"locations": [
                {"uri": uri, "range": def_range},
                {"uri": uri, "range": call_range},
                {"uri": "file:///usr/lib/python3/typing.pyi", "range": at(9, 0)},
            ]})),
            _ => None,
        }
    });
    let session = c
        .editor
        .new_session(config(&server, "auto", json!({})))
        .await;
    let (receipt, _) = c.editor.prompt(&session, "where is greet?").await;
    assert_eq!(receipt["result"]["stopReason"], "end_turn", "{receipt}");

    let requests = server.wait_for_requests(2).await;
    let offered = offered_tools(&requests[0].body);
    assert!(offered.contains(&"definition".to_string()), "{offered:?}");
    assert!(!offered.contains(&"diagnostics".to_string()), "{offered:?}");
    assert!(
        !offered.contains(&"workspace_symbols".to_string()),
        "{offered:?}"
    );
    let results = requests[1].tool_messages();
    assert_eq!(
        results[0].1,
        "1 definition of `greet` (lib.py:4):\nlib.py:1:5: def greet(name):"
    );
    assert_eq!(
        results[1].1,
        "3 references of `greet` (lib.py:1):\n\
         lib.py:1:5: def greet(name):\n\
         lib.py:4:17: msg = \"h\u{e9}llo\u{1F600}\"; greet(msg)\n\
         /usr/lib/python3/typing.pyi:10:1"
    );
    // A tool the client did not declare is not run: the model is told so.
    assert!(
        results[2].1.contains("workspace_symbols"),
        "{}",
        results[2].1
    );

    let asked = asked.lock().unwrap();
    let params_of = |method: &str| {
        asked
            .iter()
            .find(|(m, _)| m == method)
            .map(|(_, p)| p.clone())
            .unwrap_or_else(|| panic!("no {method} in {asked:?}"))
    };
    assert_eq!(
        params_of("tandem/definition"),
        json!({"uri": file_uri(&lib), "position": {"line": 3, "character": call_utf16}})
    );
    assert_eq!(
        params_of("tandem/references"),
        json!({"uri": file_uri(&lib), "position": {"line": 0, "character": 4},
               "includeDeclaration": true})
    );
    assert!(
        !asked.iter().any(|(m, _)| m == "tandem/workspaceSymbols"),
        "{asked:?}"
    );
}

#[tokio::test]
async fn definition_and_references_return_the_editors_locations_over_stdio() {
    definition_and_references_are_the_editors_locations(Wire::Stdio).await;
}

#[tokio::test]
async fn definition_and_references_return_the_editors_locations_through_the_serve() {
    definition_and_references_are_the_editors_locations(Wire::Serve).await;
}

#[tokio::test]
async fn an_editor_that_cannot_answer_gives_the_model_a_reason_and_the_turn_goes_on() {
    let (_dir, root) = workspace();
    write(&root, "a.py", "value = 1\n");
    let server = ModelServer::start().await;
    server.push(tool_calls(&[
        ("call_syms", "workspace_symbols", r#"{"query":"value"}"#),
        (
            "call_refs",
            "references",
            r#"{"path":"a.py","line":1,"symbol":"nope"}"#,
        ),
        ("call_diag", "diagnostics", "{}"),
    ]));
    server.push(text(["ok"]));
    let mut c = connect(Wire::Stdio, &root, capabilities(&ALL)).await;
    c.editor.on_request(|method, _| match method {
        // An editor without a provider: empty, with its reason.
        "tandem/workspaceSymbols" => {
            Some(json!({"symbols": [], "reason": "no workspace symbol provider"}))
        }
        "tandem/diagnostics" => Some(json!({"files": []})),
        // Anything else: method not found.
        _ => None,
    });
    let session = c
        .editor
        .new_session(config(&server, "auto", json!({})))
        .await;
    let (receipt, _) = c.editor.prompt(&session, "look").await;
    assert_eq!(receipt["result"]["stopReason"], "end_turn", "{receipt}");
    let results = server.wait_for_requests(2).await[1].tool_messages();
    assert_eq!(
        results[0].1,
        "No symbols match `value` (the editor says: no workspace symbol provider)."
    );
    assert_eq!(
        results[1].1,
        "error: `nope` is not on line 1 of `a.py`, which reads: value = 1"
    );
    assert_eq!(results[2].1, "No errors or warnings in any file.");
}

#[tokio::test]
async fn no_language_tool_is_offered_to_a_client_that_does_not_declare_them() {
    let (_dir, root) = workspace();
    let server = ModelServer::start().await;
    server.push(text(["hi"]));
    let mut c = connect(Wire::Stdio, &root, capabilities(&[])).await;
    let session = c
        .editor
        .new_session(config(&server, "auto", json!({})))
        .await;
    c.editor.prompt(&session, "hello").await;
    let offered = offered_tools(&server.wait_for_requests(1).await[0].body);
    assert!(offered.contains(&"read_file".to_string()), "{offered:?}");
    for tool in LANGUAGE_TOOLS {
        assert!(
            !offered.contains(&tool.to_string()),
            "{tool} in {offered:?}"
        );
    }
}

#[tokio::test]
async fn workspace_symbols_lists_the_editors_symbols_with_their_lines() {
    let (_dir, root) = workspace();
    let lib = write(
        &root,
        "pkg/lib.py",
        "class Greeter:\n    def greet(self):\n        pass\n",
    );
    let server = ModelServer::start().await;
    server.push(tool_calls(&[(
        "call_syms",
        "workspace_symbols",
        r#"{"query":"greet"}"#,
    )]));
    server.push(text(["ok"]));
    let mut c = connect(Wire::Stdio, &root, capabilities(&["symbols"])).await;
    let uri = file_uri(&lib);
    c.editor.on_request(move |method, params| {
        (method == "tandem/workspaceSymbols" && params == &json!({"query": "greet"})).then(|| {
            json!({"symbols": [
                {"name": "Greeter", "kind": 5, "location": {"uri": uri,
                  "range": {"start": {"line": 0, "character": 6}, "end": {"line": 0, "character": 13}}}},
                {"name": "greet", "kind": 6, "containerName": "Greeter", "location": {"uri": uri,
                  "range": {"start": {"line": 1, "character": 8}, "end": {"line": 1, "character": 13}}}},
            ]})
        })
    });
    let session = c
        .editor
        .new_session(config(&server, "auto", json!({})))
        .await;
    let (receipt, _) = c.editor.prompt(&session, "find greet").await;
    assert_eq!(receipt["result"]["stopReason"], "end_turn", "{receipt}");
    assert_eq!(
        server.wait_for_requests(2).await[1].tool_messages()[0].1,
        "2 symbols match `greet`:\n\
         pkg/lib.py:1:7: class Greeter\n     1\tclass Greeter:\n\
         pkg/lib.py:2:9: method greet (in Greeter)\n     2\t    def greet(self):"
    );
}
