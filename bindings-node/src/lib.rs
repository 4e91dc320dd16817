//! repute-node: the Node.js addon behind the npm package `repute`.
//!
//! A thin layer over `repute-host`: it converts arguments and results
//! between JavaScript and Rust and holds no pool logic. Errors are built here as
//! instances of `lib/errors.js`'s classes, registered once at load, from the
//! host's code table (see [`errors`]). Times cross the boundary as milliseconds (the
//! core counts nanoseconds). Calls that can block on IO have an `*Async`
//! form that runs on the libuv thread pool and returns a Promise; on Redis,
//! acquire and release run on the pool's own connection from the event
//! loop instead (see [`link`]).

mod args;
/// Public: its free functions are entry points of the addon (`readHeaders`).
pub mod attempts;
mod clock;
/// Public: its free functions are entry points of the addon (`setErrorClasses`).
pub mod errors;
mod events;
mod lease;
mod line;
mod link;
mod outcome;
/// Public: its free functions are entry points of the addon (`partitionOf`).
pub mod partition;
mod pool;
mod selector;
mod task;
mod units;
mod views;
