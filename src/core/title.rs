//! A session's title: the first line of its first prompt, trimmed to
//! [`TITLE_CHARS`] characters, until the user renames it. Logged as
//! `title_changed`, so listings, replays and editors read the same title.

use crate::vocab::event::UserContent;

/// The longest title taken from a prompt.
pub const TITLE_CHARS: usize = 60;

/// The longest title a user may give.
pub const MAX_RENAMED_CHARS: usize = 200;

/// The title a prompt gives a session: the first non-blank line of its
/// first text block with any (else the name of the first file it
/// attaches, else `image (png)`), at most [`TITLE_CHARS`] characters, cut with `…`. `None`
/// for a prompt with nothing to name it by.
pub fn title_of_prompt(content: &[UserContent]) -> Option<String> {
    let line = content.iter().find_map(|block| match block {
        UserContent::Text { text } => text
            .lines()
            .map(str::trim)
            .find(|line| !line.is_empty())
            .map(str::to_string),
        UserContent::Resource { .. } | UserContent::Image { .. } => None,
    });
    let line = line.or_else(|| {
        content.iter().find_map(|block| match block {
            UserContent::Resource { uri, .. } => {
                let name = uri.split('#').next()?.rsplit('/').next()?;
                (!name.is_empty()).then(|| name.to_string())
            }
            // An image-only prompt is named by its first image.
            UserContent::Image { mime_type, .. } => Some(format!(
                "image ({})",
                crate::vocab::image::image_kind(mime_type)
            )),
            UserContent::Text { .. } => None,
        })
    })?;
    Some(cut(&line, TITLE_CHARS))
}

/// A title the user gave: trimmed, one line; an error naming what is
/// wrong when it is empty or too long.
pub fn renamed_title(title: &str) -> Result<String, String> {
    let title = title.trim();
    if title.is_empty() {
        return Err("title: must not be empty".to_string());
    }
    if title.contains(['\n', '\r']) {
        return Err("title: must be one line".to_string());
    }
    if title.chars().count() > MAX_RENAMED_CHARS {
        return Err(format!("title: at most {MAX_RENAMED_CHARS} characters"));
    }
    Ok(title.to_string())
}

fn cut(line: &str, max: usize) -> String {
    if line.chars().count() <= max {
        return line.to_string();
    }
    let kept: String = line.chars().take(max - 1).collect();
    format!("{}…", kept.trim_end())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(t: &str) -> UserContent {
        UserContent::Text {
            text: t.to_string(),
        }
    }

    #[test]
    fn a_title_is_the_first_line_of_the_first_prompt_cut_to_sixty_characters() {
        assert_eq!(
            title_of_prompt(&[text("\n  Fix the parser\nthen the tests")]).as_deref(),
            Some("Fix the parser")
        );
        let long = "x".repeat(80);
        let title = title_of_prompt(&[text(&long)]).unwrap();
        assert_eq!(title.chars().count(), TITLE_CHARS);
        assert!(title.ends_with('…'));
        let file = UserContent::Resource {
            uri: "file:///p/calc.py#L2-3".to_string(),
            text: None,
        };
        assert_eq!(title_of_prompt(&[file]).as_deref(), Some("calc.py"));
        assert_eq!(title_of_prompt(&[text("   ")]), None);
    }

    #[test]
    fn a_given_title_is_one_trimmed_line() {
        assert_eq!(renamed_title("  Parser work ").unwrap(), "Parser work");
        assert!(renamed_title(" ").is_err());
        assert!(renamed_title("a\nb").is_err());
        assert!(renamed_title(&"y".repeat(201)).is_err());
    }
}
