//! End-to-end tests: real HTTP against the scripted model server.

#[path = "../support/mod.rs"]
mod support;

mod acp;
mod acp_answers;
mod acp_roots;
mod additional_roots;
mod agent_loop;
mod apply_patch;
mod approvals;
mod big_files;
mod checkpoints;
mod code_map;
mod compaction;
mod context_overflow;
mod doctor;
mod exec_cli;
mod fork;
mod freed_memory;
mod guards;
mod images;
mod instructions;
mod invalid_bodies;
mod language;
mod layers;
mod ledger;
mod locations;
mod loop_inprocess;
mod loop_wire;
mod lsp_wire;
mod mcp;
mod message_ids;
mod models;
mod nvim;
mod provider_anthropic;
mod provider_openai;
mod real_model;
mod reliability;
mod replay;
mod request_bodies;
mod sandbox;
mod serve;
mod session_lifecycle;
mod sessions;
mod state_home;
mod tasks;
