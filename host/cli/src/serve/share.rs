//! The per-tenant memory share (`--max-tenant-bytes`). Every tenant of a
//! shard lives in that shard's one wasm instance, so one tenant growing its
//! pool without bound would take the memory of all the others; the share is
//! counted in the pool's own footprint (heap bytes, an upper bound of what
//! it allocated: `repute_core::Pool::footprint`), read under the shard's
//! lock in the same call as the request it admits.
//!
//! A request that would grow a tenant already at its share is refused
//! before it runs, so nothing of it is applied; one that adds nothing new
//! (a report to a cell that exists, a lease) still runs, so a tenant at its
//! share keeps working with what it has. The share is the operator's, not
//! part of the pool's policy: a snapshot import is held to it like any
//! other request, by the footprint of the pool it would build.

use axum::http::StatusCode;
use repute_host::{PoolOps, TenantPool};

use super::problem::{Problem, ProblemBody};

/// The refusal of a request past the share.
pub fn exceeded(max: u64, held: u64) -> Problem {
    ProblemBody {
        field: Some("max_tenant_bytes".into()),
        rule: Some(format!("the tenant's pool must hold at most {max} heap bytes")),
        detail: Some(format!(
            "this request would grow the tenant's pool, which holds {held} bytes of its {max}-byte memory share \
             (--max-tenant-bytes): remove resources, or ask the operator for a larger share"
        )),
        ..ProblemBody::new(StatusCode::UNPROCESSABLE_ENTITY, "budget_exhausted", "Memory share exhausted")
    }
    .into()
}

/// What a request adds to a tenant's pool, for `admit`.
pub enum Growth<'a> {
    /// A resource, unless it is registered already.
    Resource { kind: &'a str, value: &'a str },
    /// A cell, unless the resource has one in this context already (or is
    /// not registered, which the request itself will answer).
    Cell { kind: &'a str, value: &'a str, context: &'a str },
    /// A quota group's limits, unless the group is there already (it has
    /// members or limits).
    Group { name: &'a str },
}

/// `Ok(())` when the tenant may run a request that adds `growth`: there is
/// no share, the tenant holds less than it, or the request adds nothing
/// new. Runs inside the call that then makes the request, so no other
/// request of the tenant comes between.
pub fn admit(p: &mut TenantPool<'_>, max: Option<u64>, growth: Growth<'_>) -> repute_host::Result<Result<(), Problem>> {
    let Some(max) = max else { return Ok(Ok(())) };
    let held = p.stats()?.footprint;
    if held < max {
        return Ok(Ok(()));
    }
    let adds = match growth {
        Growth::Resource { kind, value } => p.cells(kind, value).is_err(),
        Growth::Cell { kind, value, context } => p
            .cells(kind, value)
            .is_ok_and(|cells| !cells.iter().any(|c| c.context.as_ref().is_some_and(|c| c.as_str() == context))),
        Growth::Group { name } => !p.groups()?.iter().any(|g| g.name.as_str() == name),
    };
    Ok(if adds { Err(exceeded(max, held)) } else { Ok(()) })
}
