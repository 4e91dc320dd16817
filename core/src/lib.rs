//! repute-core: a reputation-aware resource pool with fenced leases, as a
//! pure state machine.
//!
//! Nothing here reads a clock, touches the OS or spawns anything: every
//! operation takes the caller's monotonic `now` (nanoseconds) and randomness
//! comes from a seeded generator stored in the pool. The same snapshot and the
//! same calls therefore give the same results, byte for byte, natively and
//! inside the WebAssembly component the host runs.
#![no_std]
// The component glue is the one place with unsafe code: wit-bindgen's
// generated ABI shims. Everything else forbids it.
#![cfg_attr(not(all(feature = "component", target_arch = "wasm32")), forbid(unsafe_code))]
#![cfg_attr(all(feature = "component", target_arch = "wasm32"), deny(unsafe_code))]
#![warn(missing_debug_implementations)]

extern crate alloc;

mod authority;
mod cell;
mod chunks;
mod command;
#[cfg(any(test, all(feature = "component", target_arch = "wasm32")))]
mod compare;
#[cfg(all(feature = "component", target_arch = "wasm32"))]
mod component;
mod error;
mod event;
mod footprint;
mod hist;
mod id;
mod index;
pub mod journal;
mod key;
mod labels;
mod lease;
mod limits;
mod outcome;
mod pace;
mod permits;
mod policy;
mod pool;
mod quota;
mod ratelimit;
mod refusal;
mod rng;
mod score;
mod secret;
mod selector;
pub mod snapshot;
mod time;
mod tree;
pub mod usage;
#[cfg(feature = "workload")]
pub mod workload;

pub use authority::{Authority, Claim, GrantAnswer, GrantRequest, Local};
pub use cell::{CellState, MAX_SCORE, MIN_SCORE};
pub use command::Command;
pub use error::{Error, Result};
pub use event::{Event, EventKind, RejectReason};
pub use id::{Context, ResourceId, GLOBAL_CONTEXT, MAX_ID_BYTES};
pub use journal::Journal;
pub use key::ResourceKey;
pub use labels::{Labels, MAX_LABELS, MAX_LABEL_NAME_BYTES};
pub use lease::{Lease, LeaseKind};
pub use limits::{ContextLimits, Limits, RetireReason, DAY, MAX_RPD, MAX_RPM, WINDOW};
pub use outcome::{check_retry_after, FailureKind, Outcome, MAX_RETRY_AFTER};
pub use policy::{CoolingRule, Policy, RateLimit, Recovery, Strategy};
pub use pool::{
    Block, CellView, GroupView, Pool, Proposal, Registration, ResourceView, Settled, Stats, MAX_AFFINITIES,
    MAX_LIMITED_GROUPS, MAX_PERMITS, MAX_REASON_BYTES,
};
pub use quota::{GroupClaim, GroupLimits, GroupName, MAX_CONCURRENCY, MAX_GROUPS};
pub use refusal::Refusal;
pub use secret::{Secret, MAX_SECRET_BYTES};
pub use selector::{LabelFilter, Selector, MAX_EXCLUDE, MAX_FILTERS, MAX_FILTER_VALUES};
pub use snapshot::SnapshotError;
pub use time::SECOND;
pub use usage::Window;
