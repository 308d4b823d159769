//! `[instructions]`: which files hold the user's and the project's
//! standing instructions for the agent (`AGENTS.md` and friends), and
//! where the user's own live.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Deserializer, Serialize};

/// The most instruction text the model is given, over every file: 32 KiB.
pub const MAX_INSTRUCTION_BYTES: usize = 32 * 1024;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct InstructionsConfig {
    /// File names looked for in each directory, in this order (`CLAUDE.md`
    /// and `GEMINI.md` may be added); plain names, no paths. Empty: no
    /// instruction files are read.
    #[serde(deserialize_with = "file_names")]
    pub files: Vec<String>,
}

impl Default for InstructionsConfig {
    fn default() -> Self {
        InstructionsConfig {
            files: vec!["AGENTS.md".to_string()],
        }
    }
}

/// Plain file names only: a name with a path in it would read files from
/// anywhere.
fn file_names<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<String>, D::Error> {
    let names = Vec::<String>::deserialize(deserializer)?;
    for name in &names {
        let plain = !name.is_empty()
            && name != "."
            && name != ".."
            && !name.contains('/')
            && !name.contains('\\')
            && !name.contains('\0');
        if !plain {
            return Err(serde::de::Error::custom(format!(
                "instructions.files: `{name}` is not a plain file name (like \"AGENTS.md\")"
            )));
        }
    }
    Ok(names)
}

/// Where the user's own instruction files are: `$TANDEM_HOME` when that
/// variable is set (the daemon's `home`), else `$XDG_CONFIG_HOME/tandem`
/// when that is set to an absolute path, else `~/.config/tandem`. `None`
/// when there is no home directory to look in.
pub fn user_instructions_dir(
    home: &Path,
    lookup: impl Fn(&str) -> Option<String>,
) -> Option<PathBuf> {
    let set = |name: &str| lookup(name).filter(|v| !v.is_empty());
    if set("TANDEM_HOME").is_some() {
        return Some(home.to_path_buf());
    }
    if let Some(config) = set("XDG_CONFIG_HOME").map(PathBuf::from) {
        if config.is_absolute() {
            return Some(config.join("tandem"));
        }
    }
    set("HOME").map(|h| PathBuf::from(h).join(".config/tandem"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ConfigBuilder;
    use serde_json::json;

    #[test]
    fn names_default_to_agents_md_and_paths_are_refused() {
        let config = ConfigBuilder::new().build().unwrap();
        assert_eq!(config.instructions.files, ["AGENTS.md"]);
        let config = ConfigBuilder::new()
            .json(
                "test",
                &json!({"instructions": {"files": ["AGENTS.md", "CLAUDE.md"]}}),
            )
            .unwrap()
            .build()
            .unwrap();
        assert_eq!(config.instructions.files, ["AGENTS.md", "CLAUDE.md"]);
        for bad in ["../x.md", "a/AGENTS.md", "", ".."] {
            let err = ConfigBuilder::new()
                .json("test", &json!({"instructions": {"files": [bad]}}))
                .unwrap_err()
                .to_string();
            assert!(err.contains("not a plain file name"), "{bad}: {err}");
        }
    }

    #[test]
    fn the_users_own_files_are_in_tandem_home_else_the_config_dir() {
        let home = Path::new("/state/tandem");
        let env = |vars: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                vars.iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| v.to_string())
            }
        };
        assert_eq!(
            user_instructions_dir(home, env(&[("TANDEM_HOME", "/t"), ("HOME", "/u")])),
            Some(home.to_path_buf())
        );
        assert_eq!(
            user_instructions_dir(home, env(&[("HOME", "/u")])),
            Some(PathBuf::from("/u/.config/tandem"))
        );
        assert_eq!(
            user_instructions_dir(home, env(&[("HOME", "/u"), ("XDG_CONFIG_HOME", "/x")])),
            Some(PathBuf::from("/x/tandem"))
        );
        assert_eq!(
            user_instructions_dir(home, env(&[("HOME", "/u"), ("XDG_CONFIG_HOME", "rel")])),
            Some(PathBuf::from("/u/.config/tandem"))
        );
        assert_eq!(user_instructions_dir(home, env(&[])), None);
    }
}
