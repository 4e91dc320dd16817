//! `repute serve`: the pool over HTTP/JSON for services in any language.
//!
//! Tenants open on first use (from their newest checkpoint on a durable
//! store); a ticker lets expiry and cooldown ends happen without traffic;
//! checkpoints are written periodically and once more after a graceful
//! shutdown (SIGTERM or ctrl-c drains in-flight requests, then saves).

//!
//! `args` reads the flags, `startup` builds the server from them and runs it,
//! `connections` serves HTTP, `ticker` runs the background work and
//! `shutdown` waits for the signal that stops it all.

mod args;
pub mod auth;
mod connections;
pub mod console;
mod extract;
mod labels;
mod metrics;
pub mod openapi;
mod probe;
pub mod problem;
pub mod routes;
mod share;
mod shutdown;
mod startup;
mod state;
pub mod tenant;
mod ticker;
mod units;
mod usage;

pub use args::Args;
pub use startup::{in_memory_app, main};
