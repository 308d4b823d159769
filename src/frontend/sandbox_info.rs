//! What `initialize` answers say about the exec sandbox (LSP:
//! `capabilities.experimental.tandem.sandbox`; ACP:
//! `agentCapabilities._meta.tandem.sandbox`), so an editor can tell its
//! user once that commands will ask every time.

use serde_json::{json, Value};

use crate::tools::exec::sandbox::probe;

/// `{available, landlockAbi?, networkIsolation, networkMechanism?, reason?}`
/// for this machine.
pub(crate) fn sandbox_capability() -> Value {
    let support = probe::support();
    let mut info = json!({
        "available": support.available(),
        "networkIsolation": support.network.is_ok(),
    });
    if let Ok(isolation) = support.network {
        info["networkMechanism"] = json!(isolation.name());
    }
    if let Ok(abi) = support.filesystem {
        info["landlockAbi"] = json!(abi);
    }
    if !support.available() {
        info["reason"] = json!(support.summary());
    }
    info
}
