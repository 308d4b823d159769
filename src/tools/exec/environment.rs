//! The child's environment: the daemon's minus secret-looking names (unless
//! allowed), plus the variables that make tools behave for a non-interactive
//! reader.

use std::ffi::{OsStr, OsString};

/// Substrings (upper case) that mark an environment variable's name as a secret.
const SECRET_NAME_MARKERS: [&str; 5] = ["KEY", "SECRET", "TOKEN", "PASSWORD", "CREDENTIAL"];
/// The child's environment: `inherited` minus secret-looking names (unless
/// allowed), plus the variables that make tools behave for a non-interactive
/// reader.
pub(super) fn child_environment(
    inherited: impl Iterator<Item = (OsString, OsString)>,
    allow: &[String],
) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = inherited
        .filter(|(name, _)| !is_secret_name(name) || allow.iter().any(|a| OsStr::new(a) == name))
        .collect();
    let overrides = [
        // Lets scripts and git hooks tell that an agent runs them.
        ("TANDEM", "1"),
        // Nobody can page: stdin is null and the reader is a model.
        ("PAGER", "cat"),
        ("GIT_PAGER", "cat"),
        // Escape codes cost the model tokens and read as noise; most tools
        // drop colour on a pipe already, this catches the ones that do not.
        ("NO_COLOR", "1"),
        // git asks for credentials on /dev/tty, which stdin null does not
        // stop; failing at once beats hanging until the timeout.
        ("GIT_TERMINAL_PROMPT", "0"),
    ];
    env.retain(|(name, _)| !overrides.iter().any(|(o, _)| OsStr::new(o) == name));
    env.extend(overrides.iter().map(|(n, v)| (n.into(), v.into())));
    env
}

pub(super) fn is_secret_name(name: &OsStr) -> bool {
    let upper = name.to_string_lossy().to_ascii_uppercase();
    SECRET_NAME_MARKERS
        .iter()
        .any(|marker| upper.contains(marker))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_names_match_case_insensitively_and_allow_list_exactly() {
        let inherited = [
            ("GITHUB_TOKEN", "t"),
            ("aws_secret_access_key", "s"),
            ("DB_Password", "p"),
            ("GOOGLE_APPLICATION_CREDENTIALS", "c"),
            ("MY_KEY", "allowed"),
            ("HOME", "/home/u"),
            ("PAGER", "less"),
        ]
        .map(|(n, v)| (OsString::from(n), OsString::from(v)));

        let env = child_environment(inherited.into_iter(), &["MY_KEY".to_string()]);

        let names: Vec<_> = env.iter().map(|(n, _)| n.to_str().unwrap()).collect();
        assert_eq!(
            names,
            [
                "MY_KEY",
                "HOME",
                "TANDEM",
                "PAGER",
                "GIT_PAGER",
                "NO_COLOR",
                "GIT_TERMINAL_PROMPT"
            ]
        );
        let pager = env.iter().find(|(n, _)| n == "PAGER").unwrap();
        assert_eq!(pager.1, "cat");
    }
}
