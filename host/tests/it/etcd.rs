//! etcd as the coordination store of sharded mode, against a real server:
//! one owner per tenant, epochs that only rise across takeovers, leases that
//! lapse without keep-alives, the watch that reports a tenant let go, and
//! PostgreSQL refusing a deposed owner's writes under the epoch etcd chose.
//!
//! Needs `REPUTE_TEST_ETCD_URL` and `REPUTE_TEST_PG_URL` (see `scripts/services.sh`).

use std::io::Write;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use repute_host::providers::{Claim, EtcdOwners, OwnerStore};
use repute_host::{
    Backend, Error, Outcome, OwnersSpec, Ownership, Pool, PoolOps, Standing, StoreError, StoreSpec, SystemClock,
    TenantConfig,
};

fn etcd_url() -> String {
    std::env::var("REPUTE_TEST_ETCD_URL")
        .expect("REPUTE_TEST_ETCD_URL is not set: run `scripts/services.sh start` and export `scripts/services.sh env`")
}

fn owners() -> EtcdOwners {
    EtcdOwners::connect(&[etcd_url()]).expect("etcd at REPUTE_TEST_ETCD_URL is reachable (`scripts/services.sh start`)")
}

/// A tenant name no earlier run used: etcd and the database outlive test runs.
fn tenant(name: &str) -> String {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos();
    format!("{name}-{}-{nanos:x}", std::process::id())
}

fn claimed(claim: Claim) -> u64 {
    match claim {
        Claim::Owned { epoch, .. } => epoch,
        other => panic!("expected to own the tenant, got {other:?}"),
    }
}

/// A fresh tenant named after `name` that owner `a` claimed, beside a
/// second owner `b`; the epoch `a` took.
fn claimed_by_a(name: &str) -> (String, EtcdOwners, EtcdOwners, u64) {
    let t = tenant(name);
    let (mut a, b) = (owners(), owners());
    let epoch = claimed(a.claim(&t, "a", "http://a", TTL).unwrap());
    (t, a, b, epoch)
}

const TTL: Duration = Duration::from_secs(1);

/// Claims `t` for `owner` until it is free, which a lapsed lease makes it
/// within etcd's lease TTL; how long that took is returned too.
fn take_over(owners: &mut EtcdOwners, t: &str, owner: &str) -> (u64, Duration) {
    let start = Instant::now();
    loop {
        match owners.claim(t, owner, &format!("http://{owner}"), TTL).unwrap() {
            Claim::Owned { epoch, .. } => return (epoch, start.elapsed()),
            Claim::Elsewhere { .. } => {
                assert!(start.elapsed() < Duration::from_secs(15), "{t} was never freed");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

#[test]
fn a_held_tenant_is_elsewhere_naming_its_owner() {
    let t = tenant("elsewhere");
    let (mut a, mut b) = (owners(), owners());
    let epoch = claimed(a.claim(&t, "a", "http://a:7070", TTL).unwrap());
    assert!(epoch > 0);
    let refused = Claim::Elsewhere { owner: "a".into(), address: "http://a:7070".into() };
    assert_eq!(b.claim(&t, "b", "http://b:7070", TTL).unwrap(), refused);
    // Asked again, whether etcd or the watch answers, the answer is the same.
    assert_eq!(b.claim(&t, "b", "http://b:7070", TTL).unwrap(), refused);
    // A claim by the owner itself does not mint a second epoch.
    assert!(matches!(a.claim(&t, "a", "http://a:7070", TTL).unwrap(), Claim::Elsewhere { .. }));
    a.resign(&t, "a", epoch).unwrap();
}

#[test]
fn renewals_keep_the_tenant_and_its_epoch() {
    let (t, mut a, mut b, epoch) = claimed_by_a("renewed");
    // Three lease lengths, kept alive every quarter TTL: never lost.
    for _ in 0..12 {
        std::thread::sleep(TTL / 4);
        let sent = Instant::now();
        let deadline = a.renew(&t, "a", epoch, TTL).unwrap().expect("still the owner");
        assert!(deadline > sent && deadline <= sent + TTL, "the deadline counts from the send time");
        assert!(matches!(b.claim(&t, "b", "http://b", TTL).unwrap(), Claim::Elsewhere { .. }));
    }
    a.resign(&t, "a", epoch).unwrap();
}

#[test]
fn resigning_frees_the_tenant_at_once_and_epochs_rise() {
    let (t, mut a, mut b, first) = claimed_by_a("resign");
    a.resign(&t, "a", first).unwrap();
    let second = claimed(b.claim(&t, "b", "http://b", TTL).unwrap());
    assert!(second > first, "epoch {second} after {first}");
    assert_eq!(a.renew(&t, "a", first, TTL).unwrap(), None, "the old owner cannot renew");
    // A stale resignation leaves the new owner alone.
    a.resign(&t, "a", first).unwrap();
    assert!(b.renew(&t, "b", second, TTL).unwrap().is_some());
    b.resign(&t, "b", second).unwrap();
    let third = claimed(a.claim(&t, "a", "http://a", TTL).unwrap());
    assert!(third > second, "epoch {third} after {second}");
    a.resign(&t, "a", third).unwrap();
}

#[test]
fn a_lease_not_kept_alive_lapses_and_another_takes_over() {
    let (t, mut a, mut b, first) = claimed_by_a("lapsed");
    // A stops renewing (paused or dead); etcd deletes the key when its lease runs out.
    let (second, waited) = take_over(&mut b, &t, "b");
    assert!(second > first, "epoch {second} after {first}");
    assert!(waited >= TTL - Duration::from_millis(100), "taken after {waited:?}: before the lease could lapse");
    assert_eq!(a.renew(&t, "a", first, TTL).unwrap(), None, "the deposed owner learns it lost the tenant");
    assert!(b.renew(&t, "b", second, TTL).unwrap().is_some());
    b.resign(&t, "b", second).unwrap();
}

#[test]
fn the_watch_reports_a_tenant_let_go() {
    let (t, mut a, mut b, epoch) = claimed_by_a("vacated");
    assert!(matches!(b.claim(&t, "b", "http://b", TTL).unwrap(), Claim::Elsewhere { .. }));
    assert!(b.vacated().is_empty());
    a.resign(&t, "a", epoch).unwrap();
    let start = Instant::now();
    loop {
        let vacated = b.vacated();
        if !vacated.is_empty() {
            assert_eq!(vacated, vec![t.clone()]);
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(5), "the watch never reported {t}");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(b.vacated().is_empty(), "reported once");
    let next = claimed(b.claim(&t, "b", "http://b", TTL).unwrap());
    b.resign(&t, "b", next).unwrap();
    // A tenant nobody here was turned away from is not reported.
    assert!(a.vacated().is_empty());
}

fn ok() -> Outcome {
    Outcome::Success { latency_ms: 10.0 }
}

fn open(store: &dyn Backend, t: &str, epoch: u64) -> Pool {
    let providers = store.providers(t, epoch, Arc::new(SystemClock::new())).unwrap();
    Pool::open(TenantConfig { durable: true, ..TenantConfig::default() }, providers).unwrap()
}

#[test]
fn postgres_refuses_the_writes_of_an_owner_deposed_in_etcd() {
    let url = std::env::var("REPUTE_TEST_PG_URL")
        .expect("REPUTE_TEST_PG_URL is not set: run `scripts/services.sh start` and export `scripts/services.sh env`");
    let store = StoreSpec::parse(&url).unwrap().open().unwrap();
    let t = tenant("deposed");
    let (mut a_owners, mut b_owners) = (owners(), owners());
    let first = claimed(a_owners.claim(&t, "a", "http://a", TTL).unwrap());
    let mut a = open(&*store, &t, first);
    a.register("proxy", "p1", 1).unwrap();
    a.report("proxy", "p1", "shop", &ok()).unwrap();
    assert_eq!(a.checkpoint(true).unwrap(), 1);

    // A is paused past its owner lease; B takes the tenant over in etcd and
    // opens it, which raises the epoch PostgreSQL checks.
    let (second, _) = take_over(&mut b_owners, &t, "b");
    let mut b = open(&*store, &t, second);
    assert_eq!(b.cells("proxy", "p1").unwrap()[0].observations, 1, "B folded A's acknowledged report");

    // A wakes up: its log append and its checkpoint carry the old epoch.
    let stale = Error::Store(StoreError::StaleEpoch { mine: first, stored: second });
    assert_eq!(a.report("proxy", "p1", "shop", &ok()), Err(stale.clone()));
    assert_eq!(a.checkpoint(true), Err(stale));
    b.report("proxy", "p1", "shop", &ok()).unwrap();
    assert_eq!(b.checkpoint(true).unwrap(), 2);
    b_owners.resign(&t, "b", second).unwrap();
}

/// A loopback forwarder to etcd that can be cut: its connections are
/// dropped and new ones closed as soon as they are accepted, as when a
/// network partition separates the owner from etcd.
struct Link {
    addr: SocketAddr,
    cut: Arc<AtomicBool>,
    open: Arc<Mutex<Vec<TcpStream>>>,
}

impl Link {
    fn to(upstream: &str) -> Link {
        let upstream: SocketAddr = upstream.strip_prefix("http://").unwrap_or(upstream).parse().unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let link = Link { addr: listener.local_addr().unwrap(), cut: Arc::default(), open: Arc::default() };
        let (cut, open) = (link.cut.clone(), link.open.clone());
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                if cut.load(Ordering::SeqCst) {
                    continue;
                }
                let Ok(server) = TcpStream::connect(upstream) else { continue };
                let mut all = open.lock().unwrap();
                for (from, to) in [(&client, &server), (&server, &client)] {
                    let (mut from, mut to) = (from.try_clone().unwrap(), to.try_clone().unwrap());
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut from, &mut to);
                        let _ = to.flush();
                        let _ = to.shutdown(Shutdown::Write);
                    });
                }
                all.extend([client, server]);
            }
        });
        link
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
        for s in self.open.lock().unwrap().drain(..) {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
}

#[test]
fn an_owner_cut_off_from_etcd_stops_serving_before_its_lease_lapses() {
    let t = tenant("demoted");
    let link = Link::to(&etcd_url());
    let cut_off = EtcdOwners::connect(&[link.url()]).unwrap();
    let ownership = Arc::new(Ownership::new(Box::new(cut_off), "http://a", TTL));
    let Standing::Claimed { epoch } = ownership.check(&t).unwrap() else { panic!("a fresh tenant is claimed") };
    let keeper = ownership.keep();
    std::thread::sleep(TTL);
    assert_eq!(ownership.serving(&t).unwrap(), epoch, "renewals kept it past one TTL");

    link.cut();
    let cut = Instant::now();
    while ownership.serving(&t).is_ok() {
        assert!(cut.elapsed() < TTL, "still serving {:?} after the cut: past its deadline", cut.elapsed());
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(matches!(ownership.serving(&t), Err(Error::NotOwner { .. })));
    // It gave up before etcd could give the tenant to anyone else (I7) ...
    let mut other = owners();
    assert!(
        matches!(other.claim(&t, "b", "http://b", TTL).unwrap(), Claim::Elsewhere { .. }),
        "etcd still counted the demoted owner's lease"
    );
    // ... which etcd does once the lease runs out, under a higher epoch.
    let (next, _) = take_over(&mut other, &t, "b");
    assert!(next > epoch);
    drop(keeper);
    other.resign(&t, "b", next).unwrap();
}

#[test]
fn owners_spec_names_etcd_endpoints_and_needs_a_fencing_store() {
    assert_eq!(OwnersSpec::parse("store").unwrap(), OwnersSpec::Store);
    assert_eq!(
        OwnersSpec::parse("etcd://127.0.0.1:2379,etcd-2.internal:2379").unwrap(),
        OwnersSpec::Etcd(vec!["http://127.0.0.1:2379".into(), "http://etcd-2.internal:2379".into()])
    );
    for bad in
        ["", "etcd://", "etcd://host", "etcd://host:0", "etcd://host:99999", "etcd://a:1,", "http://a:1", "zk://a:1"]
    {
        match OwnersSpec::parse(bad) {
            Err(Error::InvalidInput { field, .. }) => assert_eq!(field, "owners", "{bad:?}"),
            other => panic!("{bad:?}: {other:?}"),
        }
    }
    let etcd = OwnersSpec::parse(&format!("etcd://{}", etcd_url().trim_start_matches("http://"))).unwrap();
    for store in [StoreSpec::memory(), StoreSpec::parse("sqlite:unused.db").unwrap()].map(|s| s.open().unwrap()) {
        match etcd.ownership(&*store, "http://a", TTL) {
            Err(Error::InvalidInput { field, rule }) => assert!(field == "owners" && rule.contains("postgres://")),
            other => panic!("{store:?}: {other:?}"),
        }
    }
}
