use std::path::{Path, PathBuf};

use super::*;

fn sources(user: Option<&Path>, names: &[&str]) -> InstructionSources {
    InstructionSources {
        user_dir: user.map(Path::to_path_buf),
        names: names.iter().map(|n| n.to_string()).collect(),
    }
}

fn logged(event: Option<Event>) -> (Vec<InstructionFile>, String) {
    match event {
        Some(Event::Instructions { files, text, .. }) => (files, text),
        other => panic!("expected an instructions event, got {other:?}"),
    }
}

#[test]
fn an_event_only_when_the_files_or_their_content_change() {
    let root = tempfile::tempdir().unwrap();
    let roots = vec![root.path().to_path_buf()];
    let agents = root.path().join("AGENTS.md");
    std::fs::write(&agents, "use tabs\n").unwrap();
    let sources = sources(None, &["AGENTS.md"]);
    let mut state = SessionInstructions::default();
    let (files, text) = logged(state.refresh(&sources, &roots, None, None));
    assert_eq!(files.len(), 1);
    assert!(text.contains("use tabs"), "{text}");
    assert!(state.refresh(&sources, &roots, None, None).is_none());

    std::fs::write(&agents, "use spaces, four of them\n").unwrap();
    let (_, text) = logged(state.refresh(&sources, &roots, None, Some("t2".into())));
    assert!(text.contains("use spaces") && !text.contains("use tabs"));

    std::fs::remove_file(&agents).unwrap();
    let (files, text) = logged(state.refresh(&sources, &roots, None, None));
    assert!(files.is_empty() && text.is_empty(), "none any more");
    assert!(state.refresh(&sources, &roots, None, None).is_none());
}

#[test]
fn a_restored_session_logs_again_only_what_changed() {
    let root = tempfile::tempdir().unwrap();
    let roots = vec![root.path().to_path_buf()];
    std::fs::write(root.path().join("AGENTS.md"), "be brief\n").unwrap();
    let sources = sources(None, &["AGENTS.md"]);
    let event = SessionInstructions::default()
        .refresh(&sources, &roots, None, None)
        .unwrap();
    let mut reloaded = SessionInstructions::default();
    reloaded.restore(&event);
    assert_eq!(reloaded.in_force().len(), 1);
    assert!(reloaded.refresh(&sources, &roots, None, None).is_none());
}

#[test]
fn every_configured_name_is_read_and_a_linked_copy_is_given_once() {
    let root = tempfile::tempdir().unwrap();
    let user = tempfile::tempdir().unwrap();
    let roots = vec![root.path().to_path_buf()];
    std::fs::write(root.path().join("AGENTS.md"), "agents rules\n").unwrap();
    std::os::unix::fs::symlink(root.path().join("AGENTS.md"), root.path().join("CLAUDE.md"))
        .unwrap();
    std::fs::write(root.path().join("GEMINI.md"), "gemini rules\n").unwrap();
    std::fs::write(user.path().join("AGENTS.md"), "my own rules\n").unwrap();
    let sources = sources(Some(user.path()), &["AGENTS.md", "CLAUDE.md", "GEMINI.md"]);
    let (files, text) =
        logged(SessionInstructions::default().refresh(&sources, &roots, None, None));
    let paths: Vec<PathBuf> = files.iter().map(|f| PathBuf::from(&f.path)).collect();
    assert_eq!(
        paths,
        [
            user.path().join("AGENTS.md"),
            root.path().join("AGENTS.md"),
            root.path().join("GEMINI.md")
        ]
    );
    assert!(text.find("my own rules").unwrap() < text.find("agents rules").unwrap());
    assert_eq!(text.matches("agents rules").count(), 1);
}

#[test]
fn the_turns_file_adds_the_directories_down_to_it() {
    let root = tempfile::tempdir().unwrap();
    let roots = vec![root.path().to_path_buf()];
    std::fs::create_dir_all(root.path().join("src/deep")).unwrap();
    std::fs::write(root.path().join("AGENTS.md"), "root rule\n").unwrap();
    std::fs::write(root.path().join("src/AGENTS.md"), "src rule\n").unwrap();
    std::fs::write(root.path().join("src/deep/AGENTS.md"), "deep rule\n").unwrap();
    let file = root.path().join("src/deep/x.rs");
    let sources = sources(None, &["AGENTS.md"]);
    let mut state = SessionInstructions::default();
    let (files, text) = logged(state.refresh(&sources, &roots, Some(&file), None));
    assert_eq!(files.len(), 3);
    let at = |s: &str| text.find(s).unwrap();
    assert!(at("root rule") < at("src rule") && at("src rule") < at("deep rule"));
    // A follow-up about no file keeps the directories.
    assert!(state.refresh(&sources, &roots, None, None).is_none());
    // A turn about another file changes the set again.
    let other = root.path().join("src/y.rs");
    let event = state.refresh(&sources, &roots, Some(&other), None);
    let Some(Event::Instructions {
        files, text, about, ..
    }) = event
    else {
        panic!("expected an instructions event");
    };
    assert_eq!(files.len(), 2);
    assert_eq!(about, Some(other.display().to_string()));
    // A reloaded session keeps the file too.
    let mut reloaded = SessionInstructions::default();
    reloaded.restore(&Event::Instructions {
        turn_id: None,
        files,
        text,
        cut: None,
        about,
    });
    assert!(reloaded.refresh(&sources, &roots, None, None).is_none());
}

#[test]
fn the_file_of_an_input_is_its_first_attached_local_file() {
    let content = vec![
        UserContent::Text { text: "hi".into() },
        UserContent::Resource {
            uri: "untitled:1".into(),
            text: None,
        },
        UserContent::Resource {
            uri: "file:///w/src/a.rs".into(),
            text: None,
        },
    ];
    assert_eq!(attached_file(&content), Some(PathBuf::from("/w/src/a.rs")));
    // Neovim attaches a selection as `file:///…#L3-5`.
    let selection = vec![UserContent::Resource {
        uri: "file:///w/src/b.rs#L3-5".into(),
        text: Some("x\n".into()),
    }];
    assert_eq!(
        attached_file(&selection),
        Some(PathBuf::from("/w/src/b.rs"))
    );
}
