//! The names the model calls MCP tools by: `mcp__<server>__<tool>`, made
//! to fit what providers accept (`^[a-zA-Z0-9_-]{1,64}$`).
//!
//! Invariant: the names of one session's tools are distinct, and a name
//! depends only on the server, the tool and the names before it in the
//! session's (sorted) list, so it stays the same from step to step.

/// Longest tool name providers accept.
pub const MAX_NAME: usize = 64;

/// `mcp__<server>__<tool>` with every other character made `_`, and a
/// name too long cut with a hash of the whole kept at its end.
pub fn tool_name(server: &str, tool: &str) -> String {
    let raw = format!("mcp__{server}__{tool}");
    let clean: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if clean.len() <= MAX_NAME {
        return clean;
    }
    let hash = format!("_{:08x}", fnv1a(raw.as_bytes()) as u32);
    format!("{}{hash}", &clean[..MAX_NAME - hash.len()])
}

/// `name`, or `name` with `_2`, `_3`… (cut to fit) when it is taken.
pub fn unique(name: String, taken: &[String]) -> String {
    if !taken.contains(&name) {
        return name;
    }
    for n in 2.. {
        let suffix = format!("_{n}");
        let keep = name.len().min(MAX_NAME - suffix.len());
        let candidate = format!("{}{suffix}", &name[..keep]);
        if !taken.contains(&candidate) {
            return candidate;
        }
    }
    unreachable!("an unbounded counter finds a free name")
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf29ce484222325, |hash, b| {
        (hash ^ u64::from(*b)).wrapping_mul(0x100000001b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_keep_what_providers_accept_and_replace_the_rest() {
        assert_eq!(tool_name("everything", "echo"), "mcp__everything__echo");
        assert_eq!(tool_name("fs", "read.file v2"), "mcp__fs__read_file_v2");
    }

    #[test]
    fn long_names_are_cut_to_64_with_a_hash_that_keeps_them_apart() {
        let a = tool_name("server", &"a".repeat(80));
        let b = tool_name("server", &format!("{}b", "a".repeat(79)));
        assert_eq!(a.len(), MAX_NAME);
        assert_eq!(b.len(), MAX_NAME);
        assert_ne!(a, b);
    }

    #[test]
    fn collisions_get_a_number() {
        let taken = vec!["mcp__s__a_b".to_string(), "mcp__s__a_b_2".to_string()];
        assert_eq!(unique("mcp__s__a_b".to_string(), &taken), "mcp__s__a_b_3");
        let long = "x".repeat(MAX_NAME);
        let next = unique(long.clone(), &[long]);
        assert_eq!(next.len(), MAX_NAME);
        assert!(next.ends_with("_2"));
    }
}
