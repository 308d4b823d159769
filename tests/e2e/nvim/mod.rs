//! The Neovim plugin (`editors/nvim`) in a real headless Neovim, against
//! the real binary and the scripted model server. One file per concern;
//! `harness` is what they share.

mod chat;
mod controls;
mod first_use;
mod harness;
mod health;
mod hunks;
mod images;
mod language;
mod mcp;
mod models;
mod questions;
mod review;
mod rewind;
mod sessions;
mod tasks;
mod trail;
