//! The approval modes as ACP session modes (`session/set_mode`) and as a
//! `mode` config option (`session/set_config_option`), both views of the
//! one [`ApprovalMode`] of a session.
//! The model and effort options are `model_options`'.

use serde_json::{json, Value};

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
pub(super) fn mode_state(current: ApprovalMode) -> Value {
    json!({
        "currentModeId": current.as_str(),
        "availableModes": MODES.iter().map(|(mode, name, description)| json!({
            "id": mode.as_str(), "name": name, "description": description,
        })).collect::<Vec<_>>(),
    })
}

/// The session's config options: the mode, as a select.
pub(crate) fn config_options(current: ApprovalMode) -> Value {
    json!([{
        "id": MODE_OPTION,
        "name": "Approval mode",
        "description": "What the agent may do without asking",
        "category": "mode",
        "type": "select",
        "currentValue": current.as_str(),
        "options": MODES.iter().map(|(mode, name, description)| json!({
            "value": mode.as_str(), "name": name, "description": description,
        })).collect::<Vec<_>>(),
    }])
}

/// `modes` and `configOptions` of a session/new, load or resume result.
pub(crate) fn session_state(current: ApprovalMode) -> Value {
    json!({"modes": mode_state(current), "configOptions": config_options(current)})
}
