//! Bad input at the component boundary comes back as typed errors naming the
//! field and the rule, and changes nothing.

use std::sync::Arc;

use repute_host::{
    parse_outcome, Error, ManualClock, Outcome, Policy, Pool, PoolOps, Providers, Refusal, SnapshotError, TenantConfig,
};

fn pool() -> Pool {
    let providers = Providers::memory_with_clock(Arc::new(ManualClock::new(1)));
    Pool::open(TenantConfig::default(), providers).expect("open")
}

fn invalid(field: &str, rule: &str) -> Error {
    Error::InvalidInput { field: field.into(), rule: rule.into() }
}

#[test]
fn identifiers_are_checked_in_the_component() {
    let mut p = pool();
    let long = "k".repeat(257);
    assert_eq!(p.register(&long, "v", 1), Err(invalid("resource.kind", "must be at most 256 bytes")));
    assert_eq!(p.register("proxy", "", 1), Err(invalid("resource.value", "must not be empty")));
    assert_eq!(
        p.register("proxy", "a\u{0}b", 1),
        Err(invalid("resource.value", "must not contain control characters"))
    );
    assert_eq!(p.acquire("x\ny"), Err(invalid("context", "must not contain control characters")));
    assert_eq!(p.acquire("*"), Err(invalid("context", "\"*\" is reserved for the global layer")));
    assert_eq!(p.register("proxy", "a", 0), Err(invalid("permits", "must be in 1..=1024")));
    assert_eq!(
        p.block("proxy", "a", None, None, Some("bad\treason")),
        Err(invalid("reason", "must not contain control characters"))
    );
    // 256 bytes is still fine, and nothing above was registered.
    assert_eq!(p.register(&"k".repeat(256), "v", 1), Ok(true));
    assert_eq!(p.stats().unwrap().resources, 1);
}

#[test]
fn latencies_and_failure_kinds_are_checked() {
    let mut p = pool();
    p.register("proxy", "a", 1).unwrap();
    let nan = Outcome::Success { latency_ms: f64::NAN };
    assert_eq!(p.report("proxy", "a", "x.com", &nan), Err(invalid("latency", "must be a finite number")));
    let inf = parse_outcome(Some("timeout"), f64::INFINITY, None).unwrap();
    assert_eq!(p.report("proxy", "a", "x.com", &inf), Err(invalid("latency", "must be a finite number")));
    let negative = parse_outcome(None, -1.0, None).unwrap();
    assert_eq!(p.report("proxy", "a", "x.com", &negative), Err(invalid("latency", "must be >= 0")));
    assert_eq!(
        parse_outcome(Some("exploded"), 1.0, None),
        Err(invalid(
            "failure.kind",
            "must be one of connection_reset, tls_handshake, timeout, blocked, slow, rate_limited, quota_exhausted, \
             auth_failed"
        ))
    );
    // None of the refused reports reached the reputation.
    let cells = p.cells("proxy", "a").unwrap();
    assert_eq!(cells.len(), 1, "no context cell was created");
    assert_eq!(cells[0].observations, 0);
}

#[test]
fn a_corrupt_snapshot_is_refused_and_changes_nothing() {
    let mut p = pool();
    p.register("proxy", "a", 2).unwrap();
    let good = p.snapshot(true).unwrap();
    p.register("proxy", "b", 1).unwrap();
    let before = p.snapshot(true).unwrap();

    assert_eq!(p.restore(b"RPUT"), Err(Error::Snapshot(SnapshotError::Truncated)));
    assert_eq!(p.restore(&[0u8; 64]), Err(Error::Snapshot(SnapshotError::Foreign)));
    let mut flipped = good.clone();
    let last = flipped.len() - 1;
    flipped[last] ^= 0xff;
    assert_eq!(p.restore(&flipped), Err(Error::Snapshot(SnapshotError::Checksum)));
    let mut newer = good.clone();
    newer[8] = 0xff;
    assert!(matches!(p.restore(&newer), Err(Error::Snapshot(SnapshotError::UnsupportedVersion { found: 0xff, .. }))));
    assert_eq!(p.restore_json("{"), Err(Error::Snapshot(SnapshotError::Malformed)));

    assert_eq!(p.snapshot(true).unwrap(), before, "refusals left the pool as it was");
    p.restore(&good).unwrap();
    assert_eq!(p.stats().unwrap().resources, 1);
}

#[test]
fn an_invalid_policy_is_refused_at_open() {
    let policy = Policy { window: 0, ..Policy::default() };
    let providers = Providers::memory_with_clock(Arc::new(ManualClock::new(1)));
    let err = Pool::open(TenantConfig { policy, ..TenantConfig::default() }, providers).unwrap_err();
    assert_eq!(err, invalid("policy.window", "must be in 1..=1024"));
    assert_eq!(err.code(), "invalid_input");
}

#[test]
fn lease_misuse_is_typed() {
    let mut p = pool();
    p.register("proxy", "a", 1).unwrap();
    let lease = p.acquire("x.com").unwrap();
    assert_eq!(p.release(lease.id, lease.token + 1), Err(Error::StaleLease));
    assert_eq!(p.release(lease.id + 100, 1), Err(Error::UnknownLease));
    assert_eq!(
        p.acquire("x.com"),
        Err(Error::NoResourceAvailable(Refusal {
            registered: 1,
            leased: 1,
            retry_after: Some(30_000_000_000),
            expected_after: Some(30_000_000_000),
            ..Refusal::default()
        }))
    );
    assert_eq!(p.unregister("proxy", "a", false), Err(Error::Leased { live: 1 }));
    assert_eq!(p.unregister("proxy", "zz", false), Err(Error::UnknownResource));
}
