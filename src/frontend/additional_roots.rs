//! Workspace roots a session adds after its folder: ACP's
//! `additionalDirectories` of `session/new`, and `tandem/newSession`'s
//! (which `tandem acp --attach` sends them as), checked the same way.
//!
//! Invariant: every root returned is an existing directory given as an
//! absolute path or a `file://` URI; anything else is an error naming it.

use std::path::PathBuf;

use serde_json::Value;

use crate::frontend::lsp::server::folder_path;

/// The roots of a list of folders (URIs or absolute paths), or the
/// `-32602` message naming the first bad one.
pub(crate) fn additional_roots(folders: &[String]) -> Result<Vec<PathBuf>, String> {
    folders
        .iter()
        .enumerate()
        .map(|(i, folder)| {
            let path = folder_path(folder).ok_or_else(|| {
                format!("invalid params: additionalDirectories[{i}]: `{folder}` is not an absolute path")
            })?;
            if !path.is_dir() {
                return Err(format!(
                    "invalid params: additionalDirectories[{i}]: `{folder}` is not a directory"
                ));
            }
            Ok(path)
        })
        .collect()
}

/// ACP's `additionalDirectories` param (absent or null: none).
pub(crate) fn acp_additional_directories(params: &Value) -> Result<Vec<String>, String> {
    match params.get("additionalDirectories") {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(list)) => list
            .iter()
            .enumerate()
            .map(|(i, v)| {
                v.as_str().map(str::to_string).ok_or_else(|| {
                    format!("invalid params: additionalDirectories[{i}] must be a string")
                })
            })
            .collect(),
        Some(_) => Err("invalid params: additionalDirectories must be an array".to_string()),
    }
}
