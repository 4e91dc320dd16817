//! Shared helpers for the core's integration tests.

use repute_core::{
    Context, Event, EventKind, FailureKind, Outcome, Policy, Pool, Recovery, ResourceId, Strategy, SECOND,
};

pub const S: u64 = SECOND;

pub fn rid(value: &str) -> ResourceId {
    ResourceId::new("proxy", value).unwrap()
}

pub fn ctx(name: &str) -> Context {
    Context::new(name).unwrap()
}

pub fn ok() -> Outcome {
    Outcome::success(12.0).unwrap()
}

pub fn fail(kind: FailureKind) -> Outcome {
    Outcome::failure(kind, 40.0).unwrap()
}

/// A pool with the deterministic `first` strategy.
pub fn first_pool() -> Pool {
    Pool::new(Policy { strategy: Strategy::First, ..Policy::default() }, 7).unwrap()
}

/// A `first` pool under the reputation-pool 0.5.0 recovery rules.
pub fn classic_pool() -> Pool {
    Pool::new(Policy { strategy: Strategy::First, recovery: Recovery::Classic, ..Policy::default() }, 7).unwrap()
}

pub fn names(events: &[Event]) -> Vec<&'static str> {
    events.iter().map(|e| e.kind.name()).collect()
}

pub fn cooled(events: &[Event]) -> Vec<(u64, FailureKind)> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Cooled { until, cause, .. } => Some((*until, *cause)),
            _ => None,
        })
        .collect()
}
