//! Snapshots refused whole, caps on restore, rebased clocks, the JSON view.

use crate::common::*;
use repute_core::{Error, FailureKind, Policy, Pool, RateLimit, SnapshotError, Strategy};

// ---- 17. snapshots ----

#[test]
fn corrupt_truncated_foreign_and_newer_snapshots_are_refused_and_change_nothing() {
    let mut pool = first_pool();
    pool.register(rid("a"), 1, 0).unwrap();
    pool.report(&rid("a"), &ctx("x"), fail(FailureKind::Slow), 0).unwrap();
    let good = pool.snapshot(0, true);
    let mut other = first_pool();
    other.register(rid("z"), 1, 0).unwrap();
    let before = other.snapshot(0, true);

    let mut corrupt = good.clone();
    let last = corrupt.len() - 1;
    corrupt[last] ^= 0xff;
    let mut newer = good.clone();
    newer[8] = 6;
    let mut older = good.clone();
    older[8] = 4;
    let cases: Vec<(Vec<u8>, SnapshotError)> = vec![
        (corrupt, SnapshotError::Checksum),
        (good[..good.len() - 3].to_vec(), SnapshotError::Truncated),
        (good[..12].to_vec(), SnapshotError::Truncated),
        (b"PK\x03\x04 definitely a zip".to_vec(), SnapshotError::Foreign),
        (Vec::new(), SnapshotError::Truncated),
        (newer, SnapshotError::UnsupportedVersion { found: 6, supported: 5 }),
        (older, SnapshotError::UnsupportedVersion { found: 4, supported: 5 }),
    ];
    for (bytes, expected) in cases {
        assert_eq!(other.restore(&bytes, 0).unwrap_err(), Error::Snapshot(expected));
        assert_eq!(other.snapshot(0, true), before);
    }
    assert_eq!(other.restore_json("{\"format\": 9}", 0).unwrap_err().code(), "invalid_snapshot");
    assert_eq!(other.restore_json("not json", 0).unwrap_err(), Error::Snapshot(SnapshotError::Malformed));
    assert_eq!(other.snapshot(0, true), before);
}

/// The same header over another body and flags, with a matching length and checksum.
fn reframe(snapshot: &[u8], body: &[u8], flags: u16) -> Vec<u8> {
    let mut out = snapshot[..10].to_vec();
    out.extend_from_slice(&flags.to_le_bytes());
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(body).to_le_bytes());
    out.extend_from_slice(body);
    out
}

#[test]
fn trailing_bytes_unknown_flags_and_wrapping_counters_are_refused_and_change_nothing() {
    let mut pool = first_pool();
    pool.register(rid("a"), 1, 0).unwrap();
    pool.register(rid("gone"), 1, 0).unwrap();
    pool.unregister(&rid("gone"), false, 0).unwrap();
    pool.acquire(&ctx("x"), 0).unwrap();
    let good = pool.snapshot(0, true);
    assert_eq!(reframe(&good, &good[20..], 1), good, "reframing alone changes nothing");
    let json: serde_json::Value = serde_json::from_str(&pool.snapshot_json(0, true)).unwrap();
    let edit = |f: &dyn Fn(&mut serde_json::Value)| {
        let mut j = json.clone();
        f(&mut j);
        j.to_string()
    };
    let over = repute_core::snapshot::MAX_COUNTER + 1;
    assert_eq!(over, 1 << 63);
    let mut trailing = good[20..].to_vec();
    trailing.push(0);
    let rule = "must be at most u64::MAX / 2 (a counter this high could wrap)";
    let invalid = |field, rule| Error::Snapshot(SnapshotError::Invalid { field, rule });

    let mut other = first_pool();
    other.register(rid("z"), 1, 0).unwrap();
    let before = other.snapshot(0, true);
    let binary = [
        (reframe(&good, &trailing, 1), invalid("body", "must end where its data ends (trailing bytes)")),
        (reframe(&good, &good[20..], 1 | 4), invalid("flags", "unknown flag bits are set")),
        (reframe(&good, &good[20..], 0x8001), invalid("flags", "unknown flag bits are set")),
    ];
    for (bytes, expected) in binary {
        assert_eq!(other.restore(&bytes, 0).unwrap_err(), expected);
        assert_eq!(Pool::from_snapshot(&bytes, 0).unwrap_err(), expected);
        assert_eq!(other.snapshot(0, true), before);
    }
    let json_cases = [
        (edit(&|j| j["next_lease_id"] = over.into()), invalid("next_lease_id", rule)),
        (edit(&|j| j["next_lease_id"] = u64::MAX.into()), invalid("next_lease_id", rule)),
        (edit(&|j| j["resources"][0]["fences"][0] = over.into()), invalid("resource.fences", rule)),
        (edit(&|j| j["retired_fences"][0][1][0] = u64::MAX.into()), invalid("retired_fences", rule)),
        (edit(&|j| j["resources"][0]["global"]["observations"] = over.into()), invalid("cell.observations", rule)),
    ];
    for (text, expected) in json_cases {
        assert_eq!(other.restore_json(&text, 0).unwrap_err(), expected, "{text}");
        assert_eq!(other.snapshot(0, true), before);
    }

    // At the bound itself the counters are taken, and the pool goes on from there.
    let top = repute_core::snapshot::MAX_COUNTER;
    let at_bound = edit(&|j| {
        j["next_lease_id"] = top.into();
        j["resources"][0]["fences"][0] = (top - 1).into();
        j["leases"] = serde_json::json!([]);
    });
    other.restore_json(&at_bound, 0).unwrap();
    let l = other.acquire(&ctx("x"), 0).unwrap();
    assert_eq!((l.id, l.token), (top, top));
}

#[test]
fn caps_hold_a_restored_policy_to_the_operator_budgets() {
    use repute_core::snapshot::{capped, CappedInput, Caps};
    let mut open = first_pool();
    for v in ["a", "b", "c"] {
        open.register(rid(v), 1, 0).unwrap();
    }
    let three = open.snapshot(0, false);
    let caps = Caps { max_resources: Some(5), max_cells: Some(8), rate_limit: Some(RateLimit { rate: 2.0, burst: 3 }) };
    let bytes = capped(CappedInput::Binary(&three), &caps).unwrap();
    let mut restored = Pool::from_snapshot(&bytes, 0).unwrap();
    let policy: serde_json::Value =
        serde_json::from_str::<serde_json::Value>(&restored.snapshot_json(0, false)).unwrap()["policy"].clone();
    assert_eq!((policy["max_resources"].as_u64(), policy["max_cells"].as_u64()), (Some(5), Some(8)));
    assert_eq!(policy["rate_limit"], serde_json::json!({"rate": 2.0, "burst": 3}));
    // A tighter budget in the snapshot stays; the JSON form is capped the same way.
    let tight = Policy { strategy: Strategy::First, max_resources: Some(4), ..Policy::default() };
    let mut small = Pool::new(tight, 7).unwrap();
    small.register(rid("a"), 1, 0).unwrap();
    let json = small.snapshot_json(0, false);
    let restored_json = Pool::from_snapshot(&capped(CappedInput::Json(&json), &caps).unwrap(), 0).unwrap();
    assert_eq!(restored_json.policy().max_resources, Some(4));
    // More resources than the cap allows: refused, not truncated.
    let two = Caps { max_resources: Some(2), ..Caps::default() };
    assert_eq!(
        capped(CappedInput::Binary(&three), &two).unwrap_err(),
        SnapshotError::Invalid { field: "resources", rule: "must not outnumber policy.max_resources" }
    );
    restored.register(rid("d"), 1, 0).unwrap();
    restored.register(rid("e"), 1, 0).unwrap();
    assert!(matches!(
        restored.register(rid("f"), 1, 0).unwrap_err(),
        Error::BudgetExhausted { budget: "max_resources", limit: 5 }
    ));
}

#[test]
fn restored_leases_get_their_full_ttl_from_the_restore_instant() {
    let mut pool = first_pool();
    pool.register(rid("a"), 1, 0).unwrap();
    let l = pool.acquire(&ctx("x"), 0).unwrap();
    let bytes = pool.snapshot(25 * S, true);
    let mut restored = Pool::from_snapshot(&bytes, 1000 * S).unwrap();
    let back = restored.lease(l.id, 1000 * S).unwrap();
    assert_eq!((back.token, back.expires_at), (l.token, 1030 * S));
    assert!(restored.acquire(&ctx("x"), 1029 * S).is_err());
    assert_eq!(restored.renew(l.id, l.token, 1029 * S).unwrap().expires_at, 1059 * S);
    // Without leases the permit is free, and the next token still goes up.
    let mut bare = Pool::from_snapshot(&pool.snapshot(25 * S, false), 0).unwrap();
    assert_eq!(bare.acquire(&ctx("x"), 0).unwrap().token, 2);
}

#[test]
fn cooldowns_are_rebased_on_the_restoring_clock() {
    let mut pool = classic_pool();
    pool.register(rid("a"), 1, 0).unwrap();
    for _ in 0..3 {
        pool.report(&rid("a"), &ctx("x"), fail(FailureKind::Timeout), 0).unwrap();
    }
    let bytes = pool.snapshot(40 * S, false);
    let mut restored = Pool::from_snapshot(&bytes, 5000 * S).unwrap();
    assert_eq!(restored.cells(&rid("a"), 5000 * S).unwrap()[1].cooling_until, Some(5200 * S));
    assert_eq!(restored.due_for_probe(5200 * S), vec![(rid("a"), ctx("x"))]);
}

#[test]
fn json_view_round_trips_to_identical_bytes() {
    let mut pool = Pool::new(Policy::default(), 9).unwrap();
    for v in ["a", "b"] {
        pool.register(rid(v), 2, 0).unwrap();
    }
    pool.report(&rid("a"), &ctx("x"), fail(FailureKind::Blocked), 0).unwrap();
    pool.block(&rid("b"), Some(&ctx("y")), Some(9 * S), Some("rate limited upstream".into()), 0).unwrap();
    pool.acquire(&ctx("x"), 0).unwrap();
    let bin = pool.snapshot(S, true);
    let json = pool.snapshot_json(S, true);
    assert_eq!(repute_core::snapshot::binary_to_json(&bin).unwrap(), json);
    assert_eq!(repute_core::snapshot::json_to_binary(&json).unwrap(), bin);
    let mut other = first_pool();
    other.restore_json(&json, S).unwrap();
    assert_eq!(other.snapshot(S, true), bin);
}
