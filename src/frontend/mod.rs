//! Frontends translate between a wire protocol and the core. They hold no
//! agent logic: everything a frontend shows is a projection of session
//! events, everything it asks for is a call on the core's `Daemon`.

pub mod acp;
pub(crate) mod additional_roots;
pub(crate) mod answers;
mod client_pipe;
mod coalesce;
pub mod doctor;
pub mod exec;
pub mod followers;
pub(crate) mod jsonrpc_body;
pub mod lsp;
pub mod mcp_cli;
pub mod mcp_servers;
mod memory;
pub mod models;
pub use self::memory::use_one_heap;
pub(crate) mod rewind;
mod sandbox_info;
pub mod serve;
mod stdin;
pub use self::stdin::reader as stdin_reader;
mod stdout;
pub mod updates;
