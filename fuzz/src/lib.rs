//! What the fuzz targets share: the properties every accepted snapshot must
//! have, whichever form (binary or JSON) it arrived in.

use repute_core::snapshot::{binary_to_json, capped, json_to_binary, CappedInput, Caps};
use repute_core::{Context, FailureKind, Outcome, Policy, Pool, RateLimit, ResourceId, SECOND};

/// The instant snapshots are decoded at: late enough that a restored
/// deadline can lie before or after it.
pub const NOW: u64 = 1_000 * SECOND;

/// Past every block, pause, cooldown and lease a snapshot may carry (the
/// longest provider wait is 30 days).
const LATER: u64 = NOW + 40 * 24 * 3600 * SECOND;

/// Operator caps tighter than the default policy's, so that holding a
/// snapshot to them changes something.
pub const CAPS: Caps =
    Caps { max_resources: Some(3), max_cells: Some(8), rate_limit: Some(RateLimit { rate: 5.0, burst: 5 }) };

/// The full state of a pool as its snapshot at `NOW`, leases included: two
/// pools with the same state have the same bytes.
pub fn state(pool: &mut Pool) -> Vec<u8> {
    pool.snapshot(NOW, true)
}

/// Checks a snapshot that `Pool::from_snapshot` accepted (`bytes`) and the
/// pool it decoded to: its re-encoding is a fixed point, its JSON view
/// converts back to the same state, caps hold, a restore into a pool with
/// history equals a decode and never lowers a fence, and every operation
/// on the decoded pool runs (the core's own assertions and overflow checks
/// are on in fuzz builds).
pub fn accepted(bytes: &[u8], mut pool: Pool) {
    let encoded = state(&mut pool);
    let mut again = Pool::from_snapshot(&encoded, NOW).expect("a pool's own snapshot decodes");
    assert_eq!(state(&mut again), encoded, "re-encoding is not a fixed point");
    let without = pool.snapshot(NOW, false);
    Pool::from_snapshot(&without, NOW).expect("a snapshot without leases decodes");

    let json = binary_to_json(bytes).expect("an accepted snapshot has a JSON view");
    let back = json_to_binary(&json).expect("the JSON view of an accepted snapshot converts back");
    let mut from_json = Pool::from_snapshot(&back, NOW).expect("the converted snapshot decodes");
    assert_eq!(state(&mut from_json), encoded, "the JSON view does not hold the same state");

    let uncapped = capped(CappedInput::Binary(bytes), &Caps::default()).expect("no caps refuse nothing valid");
    let mut uncapped = Pool::from_snapshot(&uncapped, NOW).expect("an uncapped snapshot decodes");
    assert_eq!(state(&mut uncapped), encoded, "holding to no caps changed the state");
    held_to_caps(CappedInput::Binary(bytes));

    let mut fresh = Pool::new(Policy::default(), 7).expect("default policy");
    fresh.restore(bytes, NOW).expect("a snapshot that decodes restores");
    assert_eq!(state(&mut fresh), encoded, "restore into a fresh pool differs from a decode");
    restore_keeps_fences(|p| p.restore(bytes, NOW), true);

    exercise(&mut pool);
}

/// Checks a snapshot that `Pool::from_snapshot` (or its JSON counterpart)
/// refused: a restore is refused too and leaves the pool as it was.
pub fn refused(restore: impl Fn(&mut Pool) -> repute_core::Result<()>) {
    restore_keeps_fences(restore, false);
}

/// Holds `input` to `CAPS`: if that succeeds the result decodes, and its
/// policy and contents are within every cap.
pub fn held_to_caps(input: CappedInput<'_>) {
    let Ok(bytes) = capped(input, &CAPS) else { return };
    let pool = Pool::from_snapshot(&bytes, NOW).expect("a capped snapshot decodes");
    let policy = pool.policy();
    assert!(policy.max_resources.is_some_and(|m| m <= 3), "max_resources not capped: {:?}", policy.max_resources);
    assert!(policy.max_cells.is_some_and(|m| m <= 8), "max_cells not capped: {:?}", policy.max_cells);
    let limit = policy.rate_limit.expect("rate limit capped");
    assert!(limit.rate <= 5.0 && limit.burst <= 5, "rate limit not capped: {limit:?}");
    assert!(pool.resources().len() <= 3, "more resources than the cap");
}

/// A pool with history: two resources, a lease and a cooled cell.
fn with_history() -> (Pool, repute_core::Lease) {
    let mut pool = Pool::new(Policy::default(), 3).expect("default policy");
    let a = ResourceId::new("proxy", "a").expect("valid id");
    pool.register(a.clone(), 2, 1).expect("register");
    pool.register(ResourceId::new("key", "b").expect("valid id"), 1, 1).expect("register");
    let ctx = Context::new("x.com").expect("valid context");
    let lease = pool.acquire_for_probe(&a, &ctx, 2).or_else(|_| pool.acquire(&ctx, 2)).expect("a free permit");
    let failure = Outcome::Failure { kind: FailureKind::Timeout, latency_ms: 5.0, retry_after: None };
    for t in 3..6 {
        let _ = pool.report(&a, &ctx, failure, t);
    }
    (pool, lease)
}

/// Restores into a pool with history. A refused restore leaves it as it
/// was; an accepted one hands out lease ids and fencing tokens above every
/// one it handed out before.
fn restore_keeps_fences(restore: impl Fn(&mut Pool) -> repute_core::Result<()>, accepts: bool) {
    let (mut pool, lease) = with_history();
    let before = state(&mut pool);
    let result = restore(&mut pool);
    assert_eq!(result.is_ok(), accepts, "restore into a pool with history: {result:?}");
    if !accepts {
        assert_eq!(state(&mut pool), before, "a refused restore changed the pool");
        return;
    }
    let fresh = Context::new("fresh.example").expect("valid context");
    for _ in 0..4 {
        let Ok(next) = pool.acquire(&fresh, NOW) else { break };
        assert!(next.id > lease.id, "lease id {} reissued after restore (had {})", next.id, lease.id);
        if next.resource == lease.resource && next.permit == lease.permit {
            assert!(next.token > lease.token, "token {} reissued after restore (had {})", next.token, lease.token);
        }
    }
}

/// Every operation on every resource, lease and context of a decoded pool,
/// then again once everything it carried has run out.
fn exercise(pool: &mut Pool) {
    let probe = Context::new("fuzz.example").expect("valid context");
    let failure = Outcome::Failure { kind: FailureKind::Timeout, latency_ms: 1.0, retry_after: None };
    for now in [NOW, LATER] {
        pool.advance(now);
        let _ = pool.stats();
        let _ = pool.due_for_probe(now);
        for r in pool.resources() {
            let cells = pool.cells(&r.resource, now).expect("a listed resource has cells");
            for ctx in cells.into_iter().filter_map(|c| c.context).chain([probe.clone()]) {
                let _ = pool.acquire_for_probe(&r.resource, &ctx, now);
                let _ = pool.report(&r.resource, &ctx, failure, now);
                let _ = pool.report(&r.resource, &ctx, Outcome::Success { latency_ms: 2.0 }, now);
                let _ = pool.acquire(&ctx, now);
            }
        }
        for lease in pool.leases() {
            let _ = pool.renew(lease.id, lease.token, now);
            let _ = pool.release(lease.id, lease.token, now);
        }
        let _ = pool.snapshot(now, true);
    }
}
