//! A resource's secret reaches the holder of its lease and nothing else:
//! no event, view, lease, JSON snapshot, `Debug` output or error carries
//! it; the binary snapshot and the durable log keep it.

use std::sync::Arc;

use repute_host::linked::LinkedPool;
use repute_host::{
    holder::Field, Command, Error, Holder, Limits, ManualClock, OpenOptions, Outcome, Pool, PoolOps, Providers,
    Registration, ResourceId, Secret, Selector, StoreError, TenantConfig,
};

use crate::selection::{labels, on_both};

const SECRET: &str = "sk-live-0123456789abcdef";

fn with_secret(secret: &str) -> Registration {
    Registration {
        permits: 1,
        limits: Limits::default(),
        labels: labels(&[("tier", "paid")]),
        secret: Some(Secret::new(secret).unwrap()),
        groups: Vec::new(),
    }
}

fn exposed(secret: repute_host::Result<Option<Secret>>) -> repute_host::Result<Option<String>> {
    secret.map(|s| s.map(|s| s.expose().to_owned()))
}

fn names(_: Field) -> &'static str {
    "option"
}

#[test]
fn the_holder_of_a_lease_gets_its_resources_secret_with_the_grant_and_keeps_it() {
    let holder = Holder::open(OpenOptions::default(), Some(Arc::new(ManualClock::new(0))), names).unwrap();
    holder.with(|p| p.register_with("key", "k1", &with_secret(SECRET))).unwrap();
    holder.with(|p| p.register("key", "k2", 1)).unwrap();
    let prefer = |value: &str| Selector { prefer: Some(value.into()), ..Selector::default() };

    let k1 = holder.try_acquire("api", &prefer("k1")).unwrap().unwrap();
    assert_eq!(exposed(k1.secret()), Ok(Some(SECRET.to_owned())));
    let k2 = holder.try_acquire("api", &prefer("k2")).unwrap().unwrap();
    assert_eq!(exposed(k2.secret()), Ok(None));
    k1.release().unwrap();
    holder.with(|p| p.unregister("key", "k1", false)).unwrap();
    assert_eq!(exposed(k1.secret()), Ok(Some(SECRET.to_owned())), "kept");

    holder.with(|p| p.register_with("key", "k1", &with_secret("sk-live-second"))).unwrap();
    let again = holder.try_acquire("api", &prefer("k1")).unwrap().unwrap();
    again.release().unwrap();
    holder.with(|p| p.unregister("key", "k1", false)).unwrap();
    assert_eq!(exposed(again.secret()), Ok(Some("sk-live-second".to_owned())), "brought by the grant");
    assert_eq!(holder.with(|p| p.secret("key", "k1")), Err(Error::UnknownResource));

    // A lease adopted from a grant made elsewhere asks on first use.
    holder.with(|p| p.register_with("key", "k1", &with_secret("sk-live-third"))).unwrap();
    let adopted = holder.adopt(holder.with(|p| p.acquire_with("api", &prefer("k1"))).unwrap(), 0);
    adopted.release().unwrap();
    holder.with(|p| p.unregister("key", "k1", false)).unwrap();
    assert_eq!(adopted.secret(), Err(Error::UnknownResource), "never asked while its resource was there");
    assert!(!format!("{k1:?} {again:?} {adopted:?} {holder:?}").contains("sk-live"));
}

#[test]
fn a_secret_is_in_no_event_view_lease_or_json_snapshot() {
    on_both(|p| {
        p.register_with("key", "k1", &with_secret(SECRET)).unwrap();
        let lease = p.acquire("api").unwrap();
        p.renew(lease.id, lease.token).unwrap();
        p.report("key", "k1", "api", &Outcome::Success { latency_ms: 12.0 }).unwrap();
        p.block("key", "k1", Some("api"), Some(1_000_000), Some("manual")).unwrap();
        p.release(lease.id, lease.token).unwrap();
        assert_eq!(exposed(p.secret("key", "k1")), Ok(Some(SECRET.to_owned())));

        let events = p.drain_events().unwrap();
        assert!(events.len() >= 5, "{events:?}");
        let shown = [
            format!("{events:?}"),
            serde_json::to_string(&events).unwrap(),
            format!("{:?}", p.resources().unwrap()),
            serde_json::to_string(&p.resources().unwrap()).unwrap(),
            format!("{:?} {:?}", p.leases().unwrap(), p.lease(lease.id).unwrap()),
            p.snapshot_json(true).unwrap(),
            format!("{:?}", p.cells("key", "k1").unwrap()),
        ];
        for text in &shown {
            assert!(!text.contains("sk-live"), "{text}");
        }
        let binary = p.snapshot(true).unwrap();
        assert!(binary.windows(SECRET.len()).any(|w| w == SECRET.as_bytes()), "the binary snapshot keeps it");
    });
}

#[test]
fn debug_output_redacts_every_secret() {
    let registration = with_secret(SECRET);
    let command = Command::Register {
        resource: ResourceId::new("key", "k1").unwrap(),
        permits: 1,
        limits: Limits::default(),
        labels: registration.labels.clone(),
        secret: registration.secret.clone(),
        groups: Vec::new(),
    };
    assert_eq!(
        format!("{command:?}"),
        "Register { resource: ResourceId(Parts { kind: \"key\", value: \"k1\" }), permits: 1, \
         limits: Limits { rpm: None, tpm: None, rpd: None, tpd: None, min_interval: None, max_uses: None, \
         max_age: None, per_context: ContextLimits { rpm: None, tpm: None, min_interval: None } }, \
         labels: Labels([(\"tier\", \"paid\")]), secret: Some(Secret(<redacted>)), groups: [] }"
    );
    assert_eq!(
        format!("{registration:?}"),
        "Registration { permits: 1, limits: Limits { rpm: None, tpm: None, rpd: None, tpd: None, min_interval: None, \
         max_uses: None, max_age: None, per_context: ContextLimits { rpm: None, tpm: None, min_interval: None } }, \
         labels: Labels([(\"tier\", \"paid\")]), secret: Some(Secret(<redacted>)), groups: [] }"
    );
    let mut linked = LinkedPool::open(TenantConfig::default(), Providers::memory()).unwrap();
    linked.register_with("key", "k1", &registration).unwrap();
    let mut pool = Pool::open(TenantConfig::default(), Providers::memory()).unwrap();
    pool.register_with("key", "k1", &registration).unwrap();
    let shown = format!("{linked:?} {pool:?}");
    assert!(shown.contains("Secret(<redacted>)") && !shown.contains("sk-live"), "{shown}");
}

#[test]
fn a_json_snapshot_restores_without_the_secret_a_binary_one_with_it() {
    on_both(|p| {
        p.register_with("key", "k1", &with_secret(SECRET)).unwrap();
        let (json, binary) = (p.snapshot_json(false).unwrap(), p.snapshot(false).unwrap());
        p.restore_json(&json).unwrap();
        assert_eq!(exposed(p.secret("key", "k1")), Ok(None));
        let kept: Vec<Vec<(String, String)>> = p
            .resources()
            .unwrap()
            .iter()
            .map(|v| v.labels.iter().map(|(n, v)| (n.to_owned(), v.to_owned())).collect())
            .collect();
        assert_eq!(kept, [[("tier".to_owned(), "paid".to_owned())]], "the labels stay");
        p.restore(&binary).unwrap();
        assert_eq!(exposed(p.secret("key", "k1")), Ok(Some(SECRET.to_owned())));
    });
}

#[test]
fn a_log_entry_that_does_not_decode_is_named_without_its_text() {
    let dir = std::env::temp_dir().join(format!("repute-host-{}-secret-log", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let db = dir.join("pool.db");
    let clock = Arc::new(ManualClock::new(0));
    let open = || {
        let providers = Providers::sqlite(&db, "shop", clock.clone())?;
        Pool::open(TenantConfig { durable: true, ..TenantConfig::default() }, providers)
    };
    open().unwrap().register_with("key", "k1", &with_secret(SECRET)).unwrap();

    let conn = rusqlite::Connection::open(&db).unwrap();
    let entry: String = conn.query_row("SELECT entry FROM log WHERE seq = 1", [], |r| r.get(0)).unwrap();
    assert!(entry.contains(SECRET), "the durable log keeps the secret: {entry}");
    let broken = entry.replace("\"permits\":1", &format!("\"permits\":\"{SECRET}\""));
    conn.execute("UPDATE log SET entry = ?1 WHERE seq = 1", [&broken]).unwrap();
    drop(conn);

    let at = broken.find(&format!("\"{SECRET}\"")).unwrap() + SECRET.len() + 2;
    let expected = format!("log entry 1 ({} bytes) does not decode: data error at line 1 column {at}", broken.len());
    assert_eq!(open().unwrap_err(), Error::Store(StoreError::Unavailable(expected)));
    let _ = std::fs::remove_dir_all(&dir);
}
