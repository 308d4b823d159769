//! The shared vocabulary at the bottom of the crate: the session `Event`
//! and its parts, usage and prices, plans, approval modes, and the
//! `ClientBridge` through which tools and the core ask the editor.
//!
//! **Architecture invariant:** imports nothing from the rest of the crate.
//! Every layer above (config, buffers, workspace, providers, tools, core,
//! frontends) may use it; it uses none of them.

pub mod approval;
pub mod bridge;
pub mod checkpoint;
pub mod edit;
pub mod event;
pub mod image;
pub mod instructions;
pub mod language;
pub mod plan;
pub mod pricing;
pub mod tool_call;
