//! tandem: an agent daemon for code editors.
//!
//! The crate is organised as in `ARCHITECTURE.md`: `core` owns sessions, the
//! event log and the agent loop; `provider` speaks HTTP to model servers;
//! `tools` are what the model can call; `buffers` and `workspace` are the
//! daemon's view of the editor's files; `protocol` holds the wire shapes and
//! `frontend` translates between the wire and the core.

pub mod buffers;
pub mod config;
pub mod core;
pub mod frontend;
pub mod mcp;
pub mod protocol;
pub mod provider;
pub mod tools;
pub mod vocab;
pub mod workspace;
