//! repute-node: the Node.js addon behind the npm package `repute`.
//!
//! A thin layer over `repute-host`: it converts arguments and results
//! between JavaScript and Rust and holds no pool logic. Errors leave Rust as
//! one structured payload (see [`errors`]) that the JavaScript layer
//! (`index.js`) turns into typed error classes, so each host error is mapped
//! exactly once on each side. Times cross the boundary as milliseconds (the
//! core counts nanoseconds). Calls that can block on IO have an `*Async`
//! form that runs on the libuv thread pool and returns a Promise; on Redis,
//! acquire and release run on the pool's own connection from the event
//! loop instead (see [`link`]).

mod clock;
mod errors;
mod events;
mod lease;
mod link;
mod outcome;
mod pool;
mod task;
mod units;
mod views;
