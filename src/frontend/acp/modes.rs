//! The approval modes as ACP session modes (`session/set_mode`) and as a
//! `mode` config option (`session/set_config_option`), both views of the
//! one [`ApprovalMode`] of a session, in the schema crate's types.
//! The model and effort options are `model_options`'.

use agent_client_protocol_schema::v1 as acp;

use crate::vocab::approval::ApprovalMode;

/// The id of the mode config option.
pub(crate) const MODE_OPTION: &str = "mode";

const MODES: [(ApprovalMode, &str, &str); 3] = [
    (
        ApprovalMode::ReadOnly,
        "Read-only",
        "Reads and searches; never edits files or runs commands",
    ),
    (
        ApprovalMode::Review,
        "Review",
        "Asks before each edit and command",
    ),
    (
        ApprovalMode::Auto,
        "Auto",
        "Edits files and runs commands without asking",
    ),
];

/// ACP's `SessionModeState`.
pub(super) fn mode_state(current: ApprovalMode) -> acp::SessionModeState {
    acp::SessionModeState::new(
        current.as_str(),
        MODES
            .iter()
            .map(|(mode, name, description)| {
                acp::SessionMode::new(mode.as_str(), *name).description(description.to_string())
            })
            .collect(),
    )
}

/// The session's config options: the mode, as a select.
pub(crate) fn config_options(current: ApprovalMode) -> Vec<acp::SessionConfigOption> {
    let options: Vec<_> = MODES
        .iter()
        .map(|(mode, name, description)| {
            acp::SessionConfigSelectOption::new(mode.as_str(), *name)
                .description(description.to_string())
        })
        .collect();
    vec![
        acp::SessionConfigOption::select(MODE_OPTION, "Approval mode", current.as_str(), options)
            .description("What the agent may do without asking".to_string())
            .category(acp::SessionConfigOptionCategory::Mode),
    ]
}

/// `modes` and `configOptions` of a session/fork result (the mode's
/// option alone).
pub(crate) fn session_state(current: ApprovalMode) -> acp::LoadSessionResponse {
    acp::LoadSessionResponse::new()
        .modes(mode_state(current))
        .config_options(config_options(current))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::frontend::acp::wire::to_wire;

    #[test]
    fn the_modes_are_acps_mode_state_and_a_mode_select() {
        let mode = |id: &str, name: &str, description: &str, key: &str| json!({key: id, "name": name, "description": description});
        let all = |key: &str| {
            json!([
                mode(
                    "read-only",
                    "Read-only",
                    "Reads and searches; never edits files or runs commands",
                    key
                ),
                mode("review", "Review", "Asks before each edit and command", key),
                mode(
                    "auto",
                    "Auto",
                    "Edits files and runs commands without asking",
                    key
                ),
            ])
        };
        assert_eq!(
            to_wire(session_state(ApprovalMode::Review)),
            json!({
                "modes": {"currentModeId": "review", "availableModes": all("id")},
                "configOptions": [{
                    "id": "mode", "name": "Approval mode",
                    "description": "What the agent may do without asking",
                    "category": "mode", "type": "select", "currentValue": "review",
                    "options": all("value"),
                }],
            })
        );
    }
}
