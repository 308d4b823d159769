//! End-to-end tests: real HTTP against the scripted model server.

#[path = "../support/mod.rs"]
mod support;

mod agent_loop;
mod approvals;
mod lsp_wire;
mod provider_anthropic;
mod provider_openai;
