//! Where a turn's instruction files may be: the user's own directory,
//! each workspace root, then every directory from the root that holds
//! the turn's file down to that file's directory — most general first.

use std::path::{Path, PathBuf};

/// A directory to look in, and how its files read to the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Place {
    pub dir: PathBuf,
    pub scope: Scope,
}

/// Whose instructions a directory's files are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Scope {
    /// The user's own, for every project.
    User,
    /// A workspace root's: the whole folder.
    Root,
    /// A directory below a root: the files under it.
    Subdirectory,
}

/// The directories to look in, in the order their files are given to
/// the model (later ones are nearer the turn's file and win). `about` is
/// the file (or directory) the turn is about; outside every root it adds
/// nothing.
pub(super) fn places(
    user_dir: Option<&Path>,
    roots: &[PathBuf],
    about: Option<&Path>,
) -> Vec<Place> {
    let mut places: Vec<Place> = Vec::new();
    let mut add = |dir: PathBuf, scope: Scope| {
        if !places.iter().any(|p| p.dir == dir) {
            places.push(Place { dir, scope });
        }
    };
    if let Some(dir) = user_dir {
        add(dir.to_path_buf(), Scope::User);
    }
    for root in roots {
        add(root.clone(), Scope::Root);
    }
    if let Some((root, dir)) = about.and_then(|about| nearest_root(roots, about)) {
        // Root first, then each directory down to the file's own.
        let mut chain: Vec<PathBuf> = dir
            .ancestors()
            .take_while(|d| d.starts_with(&root) && *d != root)
            .map(Path::to_path_buf)
            .collect();
        chain.reverse();
        for dir in chain {
            add(dir, Scope::Subdirectory);
        }
    }
    places
}

/// The innermost root holding `about`, and the directory of `about`
/// (itself when it is a directory). Tried as given, then with symlinks
/// resolved (roots are resolved; an editor's path may not be).
fn nearest_root(roots: &[PathBuf], about: &Path) -> Option<(PathBuf, PathBuf)> {
    let inside = |path: &Path| {
        roots
            .iter()
            .filter(|root| path.starts_with(root))
            .max_by_key(|root| root.components().count())
            .map(|root| (root.clone(), path.to_path_buf()))
    };
    let (root, path) = inside(about).or_else(|| inside(&about.canonicalize().ok()?))?;
    let dir = if path.is_dir() {
        path
    } else {
        path.parent()?.to_path_buf()
    };
    Some((root, dir))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dirs(places: &[Place]) -> Vec<String> {
        places.iter().map(|p| p.dir.display().to_string()).collect()
    }

    #[test]
    fn the_user_then_the_roots_then_the_directories_down_to_the_file() {
        let roots = vec![PathBuf::from("/w/a"), PathBuf::from("/w/b")];
        let found = places(
            Some(Path::new("/home/u/.config/tandem")),
            &roots,
            Some(Path::new("/w/a/src/core/x.rs")),
        );
        assert_eq!(
            dirs(&found),
            [
                "/home/u/.config/tandem",
                "/w/a",
                "/w/b",
                "/w/a/src",
                "/w/a/src/core"
            ]
        );
        assert_eq!(found[0].scope, Scope::User);
        assert_eq!(found[2].scope, Scope::Root);
        assert_eq!(found[4].scope, Scope::Subdirectory);
    }

    #[test]
    fn a_file_outside_the_roots_or_at_a_root_adds_nothing() {
        let roots = vec![PathBuf::from("/w/a")];
        assert_eq!(
            dirs(&places(None, &roots, Some(Path::new("/elsewhere/x.rs")))),
            ["/w/a"]
        );
        assert_eq!(
            dirs(&places(None, &roots, Some(Path::new("/w/a/x.rs")))),
            ["/w/a"]
        );
        assert_eq!(dirs(&places(None, &[], None)), Vec::<String>::new());
    }

    #[test]
    fn nested_roots_chain_from_the_innermost() {
        let roots = vec![PathBuf::from("/w"), PathBuf::from("/w/inner")];
        assert_eq!(
            dirs(&places(None, &roots, Some(Path::new("/w/inner/src/x.rs")))),
            ["/w", "/w/inner", "/w/inner/src"]
        );
    }
}
