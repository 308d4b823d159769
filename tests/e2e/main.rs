//! End-to-end tests: real HTTP against the scripted model server.

#[path = "../support/mod.rs"]
mod support;

mod provider_anthropic;
mod provider_openai;
