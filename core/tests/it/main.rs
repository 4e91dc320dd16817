//! The core's integration tests, one binary: each module pins one side of
//! the pool's public behaviour; `common` holds their shared helpers.

mod common;
mod footprint;
mod groups;
mod journal;
mod limits;
mod pace;
mod properties;
mod recovery;
mod scenarios;
mod selectors;
mod snapshot_bounds;
mod two_phase;
