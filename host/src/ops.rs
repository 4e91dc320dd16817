//! Every pool operation, listed once: the [`PoolOps`] trait below is read
//! by `pool_ops!`, which writes the trait and each of its implementations
//! from it. [`Pool`] and [`TenantPool`] call their shard's method of the
//! same name on their tenant's slot (`shard/calls.rs`: one component call
//! each); the core linked into the host calls the function of that name in
//! `linked/ops.rs`. A new operation is a row here and those two functions.

use repute_core::{
    CellView, Context, Event, GroupLimits, GroupView, Lease, Outcome, Registration, ResourceId, ResourceView, Secret,
    Selector, Stats,
};

use crate::error::Result;
#[cfg(feature = "testing")]
use crate::linked::{self, LinkedPool};
use crate::pool::{Pool, TenantPool};

/// Writes the trait as it is given, and its implementations: a method that
/// ends in `;` is forwarded by each, one with a body is the trait's default.
macro_rules! pool_ops {
    (
        $(#[$doc:meta])*
        $vis:vis trait $name:ident {
            $(
                $(#[$op_doc:meta])*
                fn $op:ident(&mut $self:ident $(, $arg:ident: $ty:ty)* $(,)?) -> Result<$out:ty> $end:tt
            )*
        }
    ) => {
        $(#[$doc])*
        $vis trait $name {
            $( $(#[$op_doc])* fn $op(&mut $self $(, $arg: $ty)*) -> Result<$out> $end )*
        }

        impl $name for Pool {
            $( pool_ops!(@shard $op($($arg: $ty),*) $out $end); )*
        }

        impl $name for TenantPool<'_> {
            $( pool_ops!(@shard $op($($arg: $ty),*) $out $end); )*
        }

        #[cfg(feature = "testing")]
        impl $name for LinkedPool {
            $( pool_ops!(@linked $op($($arg: $ty),*) $out $end); )*
        }
    };
    (@shard $op:ident($($arg:ident: $ty:ty),*) $out:ty ;) => {
        fn $op(&mut self $(, $arg: $ty)*) -> Result<$out> {
            let (shard, tenant) = self.on_shard();
            shard.$op(tenant $(, $arg)*)
        }
    };
    (@linked $op:ident($($arg:ident: $ty:ty),*) $out:ty ;) => {
        fn $op(&mut self $(, $arg: $ty)*) -> Result<$out> {
            linked::ops::$op(self $(, $arg)*)
        }
    };
    // A default method: the implementations keep the trait's.
    (@$side:ident $op:ident($($arg:ident: $ty:ty),*) $out:ty $body:block) => {};
}

pool_ops! {
    /// Every pool operation. Each call but `secret` reads the tenant's clock
    /// once, first fires the timers due by then, and is one call into the
    /// component (a lease on a resource this host has not named before adds one
    /// call that reads no clock, to learn the resource's id). Resources are
    /// named by `kind` and `value` (each 1..=256 bytes, no control characters);
    /// contexts by a name of the same rules other than `"*"`.
    pub trait PoolOps {
        /// Registers a resource with its permits (1..=1024 concurrent leases),
        /// usage limits, labels, secret and quota groups; again to replace them. True if
        /// anything changed. Lowering permits is refused with `Leased` while a
        /// removed permit is leased; bad limits with `InvalidInput` naming
        /// `limits.rpm`, `limits.tpm`, `limits.rpd`, `limits.tpd`,
        /// `limits.min_interval`, `limits.max_uses` or `limits.max_age`; bad
        /// groups with `InvalidInput` naming `group` or `groups`.
        fn register_with(&mut self, kind: &str, value: &str, registration: &Registration) -> Result<bool>;
        /// `register_with` of `permits` alone: no limits, labels or secret.
        fn register(&mut self, kind: &str, value: &str, permits: u32) -> Result<bool> {
            self.register_with(kind, value, &Registration::new(permits))
        }
        /// Removes a resource and its cells; refused with `Leased` while leased
        /// unless `force`, which revokes the leases. Fence counters are kept.
        fn unregister(&mut self, kind: &str, value: &str, force: bool) -> Result<()>;
        /// The best lease for `context` among the resources `selector` admits
        /// (its `prefer` and `affinity` tried first), fenced by the tenant's
        /// authority, which also counts it against its resource's limits
        /// (reserving the selector's `cost` of a `tpm`). A bad selector is
        /// refused with `InvalidInput` naming its part as the core does
        /// (`kind`, `labels`, `exclude`, `prefer`, `affinity`, `cost`; see
        /// [`crate::selector_error`] for the front ends' names).
        fn acquire_with(&mut self, context: &str, selector: &Selector) -> Result<Lease>;
        /// `acquire_with`, and the granted resource's secret as `secret` gives
        /// it, in one call: what a holder that sends the request with the
        /// secret acquires by, crossing into the pool once per attempt.
        fn acquire_with_secret(&mut self, context: &str, selector: &Selector) -> Result<(Lease, Option<Secret>)>;
        /// `acquire_with` of the default selector: any resource.
        fn acquire(&mut self, context: &str) -> Result<Lease> {
            self.acquire_with(context, &Selector::default())
        }
        /// The secret the resource was registered with, if any; `UnknownResource`
        /// if it is not registered. Reads no clock (it fires no timers). The one
        /// way a secret leaves a pool: no event, view, JSON snapshot or error
        /// carries it.
        fn secret(&mut self, kind: &str, value: &str) -> Result<Option<Secret>>;
        /// A probe lease on a cell that `due_for_probe` lists.
        fn acquire_for_probe(&mut self, kind: &str, value: &str, context: &str) -> Result<Lease>;
        /// Extends a live lease by its TTL from now.
        fn renew(&mut self, id: u64, token: u64) -> Result<Lease>;
        /// Ends a live lease and frees its permit.
        fn release(&mut self, id: u64, token: u64) -> Result<()>;
        /// Reports `outcome` on a live lease's resource in its context, then
        /// ends the lease as `release` does: a finished attempt in one call.
        /// A lease that is not live is refused as `release` refuses it, with
        /// nothing reported; a report that fails leaves the lease held.
        fn report_and_release(&mut self, id: u64, token: u64, outcome: &Outcome) -> Result<()>;
        /// A live lease used `used` tokens instead of the `cost` it reserved
        /// against its resource's `tpm`: the pool and the authority count that
        /// from now on (nothing to count without a `tpm`, or once the grant has
        /// left the window). A store that failed to take it is `Error::Store`;
        /// it keeps counting the reserved tokens until the grant leaves its
        /// window.
        fn reconcile(&mut self, id: u64, token: u64, used: u64) -> Result<()>;
        /// The live lease with this id, if any.
        fn lease(&mut self, id: u64) -> Result<Option<Lease>>;
        /// Folds one outcome into the resource's reputation in `context`.
        fn report(&mut self, kind: &str, value: &str, context: &str, outcome: &Outcome) -> Result<()>;
        /// Blocks a resource everywhere (`context` none) or in one context, for
        /// `duration` ns or until unblocked.
        fn block(
            &mut self,
            kind: &str,
            value: &str,
            context: Option<&str>,
            duration: Option<u64>,
            reason: Option<&str>,
        ) -> Result<()>;
        /// Lifts a block; true if one was in place.
        fn unblock(&mut self, kind: &str, value: &str, context: Option<&str>) -> Result<bool>;
        /// Cells waiting for a probe, sorted by resource then context.
        fn due_for_probe(&mut self) -> Result<Vec<(ResourceId, Context)>>;
        /// The global cell first, then one per context sorted by context.
        fn cells(&mut self, kind: &str, value: &str) -> Result<Vec<CellView>>;
        /// Sets the limits a quota group's members share (a resource names
        /// its groups in its registration); the default limits remove them.
        /// True if anything changed. Bad limits are refused with
        /// `InvalidInput` naming `group.rpm`, `group.tpm`, `group.rpd`,
        /// `group.tpd` or `group.concurrency`; a bad name names `group`; past
        /// 10000 groups with limits, `BudgetExhausted` (`max_groups`).
        fn set_group(&mut self, name: &str, limits: &GroupLimits) -> Result<bool>;
        /// Every quota group with members or limits, sorted by name, with
        /// what its windows hold as this pool counts them.
        fn groups(&mut self) -> Result<Vec<GroupView>>;
        /// Every registered resource, sorted by id.
        fn resources(&mut self) -> Result<Vec<ResourceView>>;
        /// The live leases, sorted by id.
        fn leases(&mut self) -> Result<Vec<Lease>>;
        /// Pool-wide counters.
        fn stats(&mut self) -> Result<Stats>;
        /// The versioned binary snapshot; `with_leases` includes live leases.
        fn snapshot(&mut self, with_leases: bool) -> Result<Vec<u8>>;
        /// The same state as JSON.
        fn snapshot_json(&mut self, with_leases: bool) -> Result<String>;
        /// Replaces the state with a snapshot; a refused one changes nothing.
        fn restore(&mut self, bytes: &[u8]) -> Result<()>;
        /// `restore` from JSON.
        fn restore_json(&mut self, json: &str) -> Result<()>;
        /// Saves a checkpoint to the tenant's storage, conditional on the version
        /// last loaded or saved; returns the new version.
        fn checkpoint(&mut self, with_leases: bool) -> Result<u64>;
        /// Folds the changes other processes appended to the tenant's log since
        /// this pool last read it (durable pools); returns how many.
        fn sync(&mut self) -> Result<u32>;
        /// Events since the last drain, oldest first.
        fn drain_events(&mut self) -> Result<Vec<Event>>;
    }
}
