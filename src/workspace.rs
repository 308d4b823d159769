//! Workspace roots, path confinement, and the walking rules every listing and
//! search shares.
//!
//! Invariant: every path a tool touches comes out of [`Workspace::resolve`],
//! which refuses `..` escapes, absolute paths outside every root and symlinks
//! that point out of the roots. A refusal is a [`PathError`] that the tool
//! turns into an error the model reads.
//!
//! Paths handed to the model come out of [`Workspace::display_path`] and go
//! back in through `resolve`, so the two are designed to round-trip.

use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};

use globset::{GlobBuilder, GlobMatcher};
use ignore::WalkBuilder;
use parking_lot::RwLock;

/// Why a path was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    #[error("no workspace folder is open, so `{0}` cannot be resolved")]
    NoRoots(String),
    #[error("`{path}` is outside the workspace ({roots})")]
    OutsideWorkspace { path: String, roots: String },
    #[error("`{path}` resolves through a symlink to `{target}`, which is outside the workspace")]
    SymlinkEscape { path: String, target: String },
}

/// One workspace folder, kept in two spellings: the real path (what
/// confinement checks against) and the path as the editor gave it, so that
/// an absolute path spelled through the editor's alias (say `/tmp/x` where
/// `/tmp` is a symlink) is not mistaken for an escape.
#[derive(Debug, Clone)]
struct Root {
    canonical: PathBuf,
    given: PathBuf,
}

impl Root {
    fn new(path: &Path) -> Root {
        let given = normalize_lexically(&absolute(path));
        let canonical = canonicalize_existing_prefix(&given);
        Root { canonical, given }
    }

    fn contains_lexically(&self, path: &Path) -> bool {
        path.starts_with(&self.canonical) || path.starts_with(&self.given)
    }
}

/// The editor's workspace folders.
#[derive(Debug, Default)]
pub struct Workspace {
    roots: RwLock<Vec<Root>>,
}

impl Workspace {
    /// Roots are canonicalized where they exist.
    pub fn new(roots: Vec<PathBuf>) -> Self {
        let ws = Workspace::default();
        ws.set_roots(roots);
        ws
    }

    /// Replaces the roots, keeping their order (the first one anchors relative
    /// paths) and dropping duplicates.
    pub fn set_roots(&self, roots: Vec<PathBuf>) {
        let mut deduped: Vec<Root> = Vec::with_capacity(roots.len());
        for root in roots.iter().map(|r| Root::new(r)) {
            if !deduped.iter().any(|r| r.canonical == root.canonical) {
                deduped.push(root);
            }
        }
        *self.roots.write() = deduped;
    }

    /// Adds a root after the existing ones, unless it is already a root.
    pub fn add_root(&self, root: PathBuf) {
        let root = Root::new(&root);
        let mut roots = self.roots.write();
        if !roots.iter().any(|r| r.canonical == root.canonical) {
            roots.push(root);
        }
    }

    /// Removes the root, whichever of its spellings is given.
    pub fn remove_root(&self, root: &Path) {
        let root = Root::new(root);
        self.roots
            .write()
            .retain(|r| r.canonical != root.canonical && r.given != root.given);
    }

    /// The roots' real paths, first root first.
    pub fn roots(&self) -> Vec<PathBuf> {
        self.roots
            .read()
            .iter()
            .map(|r| r.canonical.clone())
            .collect()
    }

    /// Resolves a path given by the model (relative to the first root, or
    /// absolute) to an absolute path inside a root. The path need not exist
    /// (tools that create files resolve before creating).
    ///
    /// The result is the real path: symlinks in its existing prefix are
    /// resolved, so it is also the key the buffer cache uses.
    pub fn resolve(&self, path: &str) -> Result<PathBuf, PathError> {
        let roots = self.roots.read();
        let first = roots
            .first()
            .ok_or_else(|| PathError::NoRoots(path.to_string()))?;

        let requested = Path::new(path);
        let joined = if requested.is_absolute() {
            requested.to_path_buf()
        } else {
            first.canonical.join(requested)
        };
        // `..` is applied to the path as written, before any symlink is
        // followed: `link/..` means the folder holding `link`, which is what a
        // model reading a listing expects.
        let lexical = normalize_lexically(&joined);
        if !roots.iter().any(|r| r.contains_lexically(&lexical)) {
            return Err(PathError::OutsideWorkspace {
                path: path.to_string(),
                roots: describe_roots(&roots),
            });
        }

        let real = canonicalize_existing_prefix(&lexical);
        if !roots.iter().any(|r| real.starts_with(&r.canonical)) {
            return Err(PathError::SymlinkEscape {
                path: path.to_string(),
                target: real.display().to_string(),
            });
        }
        Ok(real)
    }

    /// The path relative to the root that contains it, for display.
    ///
    /// Only paths under the first root are shortened (to `/`-separated
    /// relative paths, `.` for the root itself), because `resolve` reads
    /// relative paths against the first root; anything else is shown
    /// absolute, so every displayed path resolves back to the same file.
    pub fn display_path(&self, path: &Path) -> String {
        let roots = self.roots.read();
        if let Some(first) = roots.first() {
            for base in [&first.canonical, &first.given] {
                if let Ok(relative) = path.strip_prefix(base) {
                    return slash_path(relative);
                }
            }
        }
        path.display().to_string()
    }
}

/// A `file://` URI for an absolute path (`url`'s percent-encoding of the
/// path's bytes); a relative path is taken from `/`.
pub fn file_uri(path: &Path) -> String {
    let absolute;
    let path = if path.is_absolute() {
        path
    } else {
        absolute = Path::new("/").join(path);
        &absolute
    };
    url::Url::from_file_path(path)
        .map(String::from)
        .unwrap_or_else(|()| format!("file://{}", path.display()))
}

/// `file:///a/b` to `/a/b` (percent-decoded); `None` for other schemes and
/// for a `file://host/…` that names another machine.
pub fn file_uri_to_path(uri: &str) -> Option<PathBuf> {
    url::Url::parse(uri)
        .ok()
        .filter(|url| url.scheme() == "file")?
        .to_file_path()
        .ok()
}

/// A relative path with `/` separators; `.` when empty.
pub fn slash_path(relative: &Path) -> String {
    let parts: Vec<_> = relative
        .components()
        .filter_map(|c| match c {
            Component::Normal(part) => Some(part.to_string_lossy()),
            _ => None,
        })
        .collect();
    if parts.is_empty() {
        ".".to_string()
    } else {
        parts.join("/")
    }
}

/// The directory walker every listing and search uses, so that they agree
/// on what is visible: `.gitignore` (also outside git repositories),
/// `.ignore`, git's exclude files, no hidden files, never `.git`, symlinks
/// not followed.
pub fn walk_builder(dir: &Path) -> WalkBuilder {
    let mut builder = WalkBuilder::new(dir);
    builder
        .hidden(true)
        .ignore(true)
        .git_ignore(true)
        .git_exclude(true)
        .git_global(true)
        .parents(true)
        .require_git(false)
        .follow_links(false)
        .filter_entry(|entry| entry.file_name() != ".git");
    builder
}

/// A `glob` argument of a tool, matched against displayed (root-relative,
/// `/`-separated) paths.
///
/// `*` and `?` never cross `/`; `**` does. A glob without `/` matches the
/// file name at any depth (`*.rs` finds `src/a/b.rs`), as in `.gitignore`;
/// a glob with `/` matches the whole path (`src/*.rs`: direct children of
/// `src`; `src/**/*.rs`: any depth).
#[derive(Debug, Clone)]
pub struct PathGlob {
    matcher: GlobMatcher,
    file_name_only: bool,
}

impl PathGlob {
    pub fn new(pattern: &str) -> Result<PathGlob, globset::Error> {
        let pattern = pattern.strip_prefix("./").unwrap_or(pattern);
        let glob = GlobBuilder::new(pattern).literal_separator(true).build()?;
        Ok(PathGlob {
            matcher: glob.compile_matcher(),
            file_name_only: !pattern.contains('/'),
        })
    }

    /// `display_path` is a path as [`Workspace::display_path`] shows it.
    pub fn is_match(&self, display_path: &str) -> bool {
        if self.file_name_only {
            let name = display_path.rsplit('/').next().unwrap_or(display_path);
            self.matcher.is_match(name)
        } else {
            self.matcher.is_match(display_path)
        }
    }
}

fn describe_roots(roots: &[Root]) -> String {
    roots
        .iter()
        .map(|r| r.canonical.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

fn absolute(path: &Path) -> PathBuf {
    if path.is_absolute() {
        return path.to_path_buf();
    }
    match std::env::current_dir() {
        Ok(cwd) => cwd.join(path),
        Err(_) => path.to_path_buf(),
    }
}

/// Removes `.` and applies `..` without touching the file system; `..` at
/// the file system root stays at the root, as the OS does.
fn normalize_lexically(path: &Path) -> PathBuf {
    let mut normal = PathBuf::new();
    for component in path.components() {
        match component {
            Component::Prefix(_) | Component::RootDir => normal.push(component.as_os_str()),
            Component::CurDir => {}
            Component::ParentDir => {
                normal.pop();
            }
            Component::Normal(part) => normal.push(part),
        }
    }
    normal
}

/// Symlinks followed before giving up on a chain of dangling links.
const MAX_SYMLINK_HOPS: usize = 40;

/// Canonicalizes the longest existing prefix of an absolute, lexically
/// normal path and appends the rest. A dangling symlink in the path is
/// followed to where it points, because creating a file through it would
/// create the file there.
fn canonicalize_existing_prefix(path: &Path) -> PathBuf {
    canonicalize_with_hops(path, MAX_SYMLINK_HOPS)
}

fn canonicalize_with_hops(path: &Path, hops_left: usize) -> PathBuf {
    let mut missing: Vec<OsString> = Vec::new();
    let mut existing = path;
    let base = loop {
        if let Ok(real) = std::fs::canonicalize(existing) {
            break real;
        }
        let is_symlink = std::fs::symlink_metadata(existing)
            .map(|m| m.file_type().is_symlink())
            .unwrap_or(false);
        if is_symlink && hops_left > 0 {
            if let Ok(target) = std::fs::read_link(existing) {
                let parent = existing.parent().unwrap_or(Path::new("/"));
                let target = normalize_lexically(&parent.join(target));
                break canonicalize_with_hops(&target, hops_left - 1);
            }
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                missing.push(name.to_os_string());
                existing = parent;
            }
            // Nothing exists, not even the file system root: keep the
            // lexical path; any operation on it fails anyway.
            _ => return path.to_path_buf(),
        }
    };
    missing.iter().rev().fold(base, |acc, part| acc.join(part))
}

#[cfg(test)]
mod tests {
    #[test]
    fn file_uris_round_trip_with_percent_encoding() {
        use super::{file_uri, file_uri_to_path};
        let path = std::path::Path::new("/a b/ü#?%.rs");
        assert_eq!(file_uri(path), "file:///a%20b/%C3%BC%23%3F%25.rs");
        assert_eq!(file_uri_to_path(&file_uri(path)).as_deref(), Some(path));
        assert_eq!(
            file_uri_to_path("file:///tmp/a%20b.rs"),
            Some(std::path::PathBuf::from("/tmp/a b.rs"))
        );
        assert_eq!(file_uri_to_path("untitled:Untitled-1"), None);
        assert_eq!(file_uri_to_path("file://elsewhere/tmp/x"), None);
    }

    use super::*;
    use std::os::unix::fs::symlink;

    struct Fixture {
        _dir: tempfile::TempDir,
        root: PathBuf,
        outside: PathBuf,
        ws: Workspace,
    }

    /// `<tmp>/root` is the workspace; `<tmp>/outside` holds `secret.txt`.
    fn fixture() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let root = base.join("root");
        let outside = base.join("outside");
        std::fs::create_dir_all(root.join("src/nested")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(root.join("src/nested/mod.rs"), "").unwrap();
        std::fs::write(outside.join("secret.txt"), "secret").unwrap();
        let ws = Workspace::new(vec![root.clone()]);
        Fixture {
            _dir: dir,
            root,
            outside,
            ws,
        }
    }

    #[test]
    fn relative_and_nested_paths_resolve_against_the_first_root() {
        let f = fixture();
        assert_eq!(
            f.ws.resolve("src/nested/mod.rs").unwrap(),
            f.root.join("src/nested/mod.rs")
        );
        assert_eq!(f.ws.resolve("./src").unwrap(), f.root.join("src"));
        assert_eq!(f.ws.resolve("").unwrap(), f.root);
        assert_eq!(f.ws.resolve(".").unwrap(), f.root);
    }

    #[test]
    fn absolute_path_inside_a_root_is_accepted() {
        let f = fixture();
        let abs = f.root.join("src/nested/mod.rs");
        assert_eq!(f.ws.resolve(abs.to_str().unwrap()).unwrap(), abs);
    }

    #[test]
    fn nonexistent_path_inside_the_root_resolves_for_tools_that_create_files() {
        let f = fixture();
        assert_eq!(
            f.ws.resolve("src/new/dir/file.rs").unwrap(),
            f.root.join("src/new/dir/file.rs")
        );
    }

    #[test]
    fn dot_dot_that_stays_inside_the_root_is_fine() {
        let f = fixture();
        assert_eq!(
            f.ws.resolve("src/nested/../lib.rs").unwrap(),
            f.root.join("src/lib.rs")
        );
        assert_eq!(
            f.ws.resolve("src/../../root/src").unwrap(),
            f.root.join("src")
        );
    }

    #[test]
    fn dot_dot_leaving_the_root_is_refused_with_the_roots_named() {
        let f = fixture();
        let err = f.ws.resolve("../outside/secret.txt").unwrap_err();
        assert_eq!(
            err,
            PathError::OutsideWorkspace {
                path: "../outside/secret.txt".into(),
                roots: f.root.display().to_string(),
            }
        );
        assert_eq!(
            err.to_string(),
            format!(
                "`../outside/secret.txt` is outside the workspace ({})",
                f.root.display()
            )
        );
    }

    #[test]
    fn absolute_path_outside_every_root_is_refused() {
        let f = fixture();
        assert!(matches!(
            f.ws.resolve("/etc/passwd"),
            Err(PathError::OutsideWorkspace { .. })
        ));
        let sibling = f.outside.join("secret.txt");
        assert!(matches!(
            f.ws.resolve(sibling.to_str().unwrap()),
            Err(PathError::OutsideWorkspace { .. })
        ));
    }

    #[test]
    fn root_prefix_that_is_not_a_path_prefix_is_outside() {
        let f = fixture();
        let lookalike = format!("{}-evil/file", f.root.display());
        assert!(matches!(
            f.ws.resolve(&lookalike),
            Err(PathError::OutsideWorkspace { .. })
        ));
    }

    #[test]
    fn file_symlink_pointing_outside_is_refused_naming_the_target() {
        let f = fixture();
        symlink(f.outside.join("secret.txt"), f.root.join("innocent.txt")).unwrap();
        let err = f.ws.resolve("innocent.txt").unwrap_err();
        assert_eq!(
            err,
            PathError::SymlinkEscape {
                path: "innocent.txt".into(),
                target: f.outside.join("secret.txt").display().to_string(),
            }
        );
    }

    #[test]
    fn directory_symlink_pointing_outside_is_refused() {
        let f = fixture();
        symlink(&f.outside, f.root.join("linked")).unwrap();
        assert!(matches!(
            f.ws.resolve("linked"),
            Err(PathError::SymlinkEscape { .. })
        ));
        assert!(matches!(
            f.ws.resolve("linked/secret.txt"),
            Err(PathError::SymlinkEscape { .. })
        ));
    }

    #[test]
    fn nonexistent_file_under_a_symlinked_out_directory_is_refused() {
        let f = fixture();
        symlink(&f.outside, f.root.join("linked")).unwrap();
        let err = f.ws.resolve("linked/new/file.rs").unwrap_err();
        assert_eq!(
            err,
            PathError::SymlinkEscape {
                path: "linked/new/file.rs".into(),
                target: f.outside.join("new/file.rs").display().to_string(),
            }
        );
    }

    #[test]
    fn dangling_symlink_pointing_outside_is_refused() {
        let f = fixture();
        symlink(f.outside.join("not-yet.txt"), f.root.join("dangling")).unwrap();
        assert!(matches!(
            f.ws.resolve("dangling"),
            Err(PathError::SymlinkEscape { .. })
        ));
    }

    #[test]
    fn symlink_inside_the_root_resolves_to_its_real_path() {
        let f = fixture();
        symlink(f.root.join("src"), f.root.join("alias")).unwrap();
        assert_eq!(
            f.ws.resolve("alias/nested/mod.rs").unwrap(),
            f.root.join("src/nested/mod.rs")
        );
    }

    #[test]
    fn absolute_path_spelled_through_the_roots_alias_is_inside() {
        let f = fixture();
        let alias = f.outside.join("root-alias");
        symlink(&f.root, &alias).unwrap();
        let ws = Workspace::new(vec![alias.clone()]);
        assert_eq!(ws.roots(), vec![f.root.clone()]);
        let spelled = alias.join("src/nested/mod.rs");
        assert_eq!(
            ws.resolve(spelled.to_str().unwrap()).unwrap(),
            f.root.join("src/nested/mod.rs")
        );
    }

    #[test]
    fn no_roots_is_its_own_error() {
        let ws = Workspace::new(vec![]);
        assert_eq!(ws.resolve("a.rs"), Err(PathError::NoRoots("a.rs".into())));
    }

    #[test]
    fn roots_are_canonical_and_deduplicated() {
        let f = fixture();
        let spelled = f.root.join("src/..");
        let ws = Workspace::new(vec![f.root.clone(), spelled.clone()]);
        assert_eq!(ws.roots(), vec![f.root.clone()]);
        ws.add_root(spelled);
        assert_eq!(ws.roots(), vec![f.root.clone()]);
        ws.add_root(f.outside.clone());
        assert_eq!(ws.roots(), vec![f.root.clone(), f.outside.clone()]);
        ws.remove_root(&f.root);
        assert_eq!(ws.roots(), vec![f.outside.clone()]);
    }

    #[test]
    fn absolute_path_in_a_second_root_is_accepted() {
        let f = fixture();
        f.ws.add_root(f.outside.clone());
        let secret = f.outside.join("secret.txt");
        assert_eq!(f.ws.resolve(secret.to_str().unwrap()).unwrap(), secret);
    }

    #[test]
    fn display_path_is_relative_to_the_first_root_and_round_trips() {
        let f = fixture();
        let file = f.root.join("src/nested/mod.rs");
        assert_eq!(f.ws.display_path(&file), "src/nested/mod.rs");
        assert_eq!(f.ws.display_path(&f.root), ".");
        f.ws.add_root(f.outside.clone());
        let secret = f.outside.join("secret.txt");
        let shown = f.ws.display_path(&secret);
        assert_eq!(shown, secret.display().to_string());
        assert_eq!(f.ws.resolve(&shown).unwrap(), secret);
        assert_eq!(f.ws.display_path(Path::new("/etc/passwd")), "/etc/passwd");
    }

    #[test]
    fn glob_without_slash_matches_file_names_at_any_depth() {
        let glob = PathGlob::new("*.rs").unwrap();
        assert!(glob.is_match("main.rs"));
        assert!(glob.is_match("src/a/b.rs"));
        assert!(!glob.is_match("src/a/b.txt"));
    }

    #[test]
    fn glob_with_slash_matches_the_whole_path_and_star_stays_in_one_directory() {
        let direct = PathGlob::new("src/*").unwrap();
        assert!(direct.is_match("src/main.rs"));
        assert!(!direct.is_match("src/a/b.rs"));
        let deep = PathGlob::new("**/*.rs").unwrap();
        assert!(deep.is_match("main.rs"));
        assert!(deep.is_match("src/a/b.rs"));
        assert!(PathGlob::new("./src/*.rs").unwrap().is_match("src/lib.rs"));
    }
}
