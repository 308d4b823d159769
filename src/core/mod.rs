//! The agent core: sessions, their event logs, the projection of a log into
//! model messages, and the driver that runs turns. Knows nothing of LSP, ACP
//! or JSON-RPC; frontends talk to it through [`daemon::Daemon`].

pub mod checkpoints;
pub mod client;
pub mod daemon;
pub mod driver;
pub mod guards;
pub mod history;
pub mod images;
pub mod instructions;
pub mod ledger;
pub mod liveness;
pub mod log;
pub mod output_budget;
pub mod projection;
pub mod session;
pub mod session_model;
pub mod spend;
pub mod tasks;
pub mod title;
