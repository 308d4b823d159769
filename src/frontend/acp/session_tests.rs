//! The answers built from the schema's types are the JSON `tandem acp`
//! wrote before them, field for field.

use serde_json::json;

use super::*;

#[test]
fn initialize_answers_acps_capabilities_with_tandems_under_meta() {
    let home = tempfile::tempdir().unwrap();
    let result = initialize_result(home.path());
    assert_eq!(
        result,
        json!({
            "protocolVersion": 1,
            "agentCapabilities": {
                "loadSession": true,
                "promptCapabilities": {"image": true, "audio": false, "embeddedContext": true},
                "sessionCapabilities": {"list": {}, "resume": {}, "close": {}, "delete": {},
                                        "fork": {}, "additionalDirectories": {}},
                "mcpCapabilities": {"http": true, "sse": false},
                "_meta": {"tandem": {"sandbox": crate::frontend::sandbox_info::sandbox_capability()}},
            },
            "authMethods": [{
                "id": "api-key",
                "name": result["authMethods"][0]["name"],
                "description": result["authMethods"][0]["description"],
            }],
            "agentInfo": {"name": "tandem", "version": env!("CARGO_PKG_VERSION")},
        })
    );
    assert!(result["authMethods"][0]["name"]
        .as_str()
        .unwrap()
        .starts_with("API key in "));
}

fn summary(id: &str, workspace: &[&str]) -> SessionSummary {
    SessionSummary {
        session_id: id.into(),
        title: format!("chat {id}"),
        workspace: workspace.iter().map(|w| w.to_string()).collect(),
        created: "2026-01-01T00:00:00Z".into(),
        updated: "2026-01-02T00:00:00Z".into(),
        state: crate::core::history::SessionState::Idle,
        turn_count: 2,
        kind: crate::core::history::SessionKind::Chat,
        empty: false,
    }
}

#[test]
fn a_session_list_page_keeps_every_field_and_an_empty_directory_list() {
    let page = list_page(
        vec![summary("s1", &["/w"]), summary("s2", &["/w", "/lib"])],
        &json!({}),
    )
    .unwrap();
    assert_eq!(
        page,
        json!({"sessions": [
            {"sessionId": "s1", "cwd": "/w", "additionalDirectories": [], "title": "chat s1",
             "updatedAt": "2026-01-02T00:00:00Z",
             "_meta": {"tandem": {"state": "idle", "turnCount": 2}}},
            {"sessionId": "s2", "cwd": "/w", "additionalDirectories": ["/lib"], "title": "chat s2",
             "updatedAt": "2026-01-02T00:00:00Z",
             "_meta": {"tandem": {"state": "idle", "turnCount": 2}}},
        ]})
    );
    let many: Vec<_> = (0..LIST_PAGE + 1)
        .map(|n| summary(&format!("s{n}"), &["/w"]))
        .collect();
    assert_eq!(list_page(many, &json!({})).unwrap()["nextCursor"], "20");
}
