//! What every store that several processes share (PostgreSQL, Redis) must
//! show, written once and run against each by its own test file: the
//! authority never lets two pools hold one permit, every copy folds the log
//! in the same order, the acquire rate limit is shared, a checkpoint older
//! than the stored one is refused, a slot another process freed and
//! filled again names its new resource, and a resource's usage limits
//! count the grants of every process. Each pool stands for a process: it
//! has a connection of its own.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use repute_host::holder::{Holder, OpenOptions};
use repute_host::providers::Checkpoint;
use repute_host::{
    Backend, EmbeddedPool, Error, GroupLimits, GroupName, Limits, Mode, Outcome, Policy, Pool, PoolOps, RateLimit,
    Registration, Selector, Sharing, StoreError, Strategy, SystemClock, TenantConfig, Window, SECOND, WINDOW,
};

/// The tests of this module as `#[test]` functions of a store's test file.
/// `$opener()` gives the store's `Opener`; `$db()` a handle whose
/// `tenant(t, 0).0` is the tenant's storage; each of 6 threads makes
/// `$grants` grants in the exclusion test.
macro_rules! shared_store_tests {
    (opener: $opener:ident, db: $db:ident, grants: $grants:expr) => {
        #[test]
        fn the_authority_never_grants_one_permit_twice() {
            crate::shared_store::never_grants_one_permit_twice(&$opener(), 6, $grants);
        }

        #[test]
        fn every_process_folds_the_log_in_the_same_order() {
            crate::shared_store::every_copy_folds_the_log_in_the_same_order(&$opener());
        }

        #[test]
        fn processes_sharing_a_tenant_share_its_rate_limit() {
            crate::shared_store::the_rate_limit_is_shared(&$opener());
        }

        #[test]
        fn a_slot_reused_by_another_process_names_the_new_resource() {
            crate::shared_store::a_slot_reused_by_another_process_names_the_new_resource(&$opener());
        }

        #[test]
        fn usage_limits_hold_across_processes() {
            crate::shared_store::usage_limits_hold_across_processes(&$opener());
        }

        #[test]
        fn the_views_show_the_window_of_every_process() {
            crate::shared_store::the_views_show_the_window_of_every_process(&$opener());
        }

        #[test]
        fn a_release_tells_the_pools_waiting_in_line() {
            crate::shared_store::a_release_tells_the_pools_waiting_in_line(&$opener(), &$db());
        }

        #[test]
        fn the_group_views_count_every_process() {
            crate::shared_store::the_group_views_count_every_process(&$opener());
        }

        #[test]
        fn a_checkpoint_behind_the_stored_one_is_refused() {
            let db = $db();
            crate::shared_store::a_checkpoint_behind_the_stored_one_is_refused(&$opener(), &|t| {
                db.tenant(t, 0).0.load().unwrap()
            });
        }
    };
}
pub(crate) use shared_store_tests;

/// Opens a pool of `tenant` (shared mode: epoch 0) with `policy`.
pub type Opener = Arc<dyn Fn(&str, Policy) -> Pool + Send + Sync>;

/// A tenant name no earlier run used: the servers outlive test runs.
pub fn tenant(name: &str) -> String {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos();
    format!("{name}-{}-{nanos:x}", std::process::id())
}

/// `threads` pools take and give back 3 single-permit resources `grants`
/// times each. A holder leaves the map before it releases and enters after
/// it was granted, so an overlap in the map is a real double grant.
pub fn never_grants_one_permit_twice(open: &Opener, threads: usize, grants: usize) {
    let t = tenant("exclusive");
    {
        let mut setup = open(&t, Policy::default());
        for r in ["a", "b", "c"] {
            setup.register("proxy", r, 1).unwrap();
        }
    }
    let holders: Arc<Mutex<HashMap<String, u64>>> = Arc::default();
    let tokens: Arc<Mutex<HashMap<String, Vec<u64>>>> = Arc::default();
    let workers: Vec<_> = (0..threads)
        .map(|_| {
            let (open, t, holders, tokens) = (open.clone(), t.clone(), holders.clone(), tokens.clone());
            std::thread::spawn(move || {
                let mut pool = open(&t, Policy::default());
                let mut granted = 0;
                while granted < grants {
                    let lease = match pool.acquire("shop") {
                        Ok(lease) => lease,
                        Err(Error::NoResourceAvailable { .. }) => continue,
                        Err(e) => panic!("acquire: {e}"),
                    };
                    let key = lease.resource.value().to_owned();
                    let before = holders.lock().unwrap().insert(key.clone(), lease.token);
                    assert_eq!(before, None, "{key} granted with token {} while held", lease.token);
                    tokens.lock().unwrap().entry(key.clone()).or_default().push(lease.token);
                    holders.lock().unwrap().remove(&key);
                    pool.release(lease.id, lease.token).unwrap();
                    granted += 1;
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join().unwrap();
    }
    let tokens = tokens.lock().unwrap();
    assert_eq!(tokens.values().map(Vec::len).sum::<usize>(), threads * grants);
    for (resource, issued) in tokens.iter() {
        let mut sorted = issued.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), issued.len(), "a token of {resource} was issued twice");
        let span = sorted.last().unwrap() - sorted.first().unwrap() + 1;
        assert_eq!(span, issued.len() as u64, "{resource}: consecutive tokens, none skipped");
    }
}

/// Four processes (each an embedded pool, as a binding opens it), each
/// with two workers as eager as the others', take and give back members of
/// a group whose concurrency is 2 for a while, waiting for a slot when
/// refused: each process gets its fair share of the grants within 20 %.
/// The process that just released asks again at once (its own release
/// wakes its waiter), the others when the store tells them: without a
/// line at the store, the releasing process takes the slot it freed
/// nearly every time. Returns the grants per process.
pub fn a_capped_group_is_shared_fairly_between_processes(url: &str) -> Vec<u32> {
    const PROCESSES: usize = 4;
    const WORKERS: usize = 2;
    let t = tenant("fair");
    let options = || OpenOptions {
        store: Some(url.to_owned()),
        tenant: Some(t.clone()),
        mode: Some("shared".into()),
        ..OpenOptions::default()
    };
    let holders: Vec<Arc<Holder>> =
        (0..PROCESSES).map(|_| Holder::open(options(), None, |_| "option").unwrap()).collect();
    holders[0]
        .with(|p| {
            p.set_group("capped", &GroupLimits { concurrency: Some(2), ..GroupLimits::default() })?;
            let member = Registration { groups: vec![GroupName::new("capped").unwrap()], ..Registration::new(1) };
            for key in ["k1", "k2", "k3", "k4"] {
                p.register_with("key", key, &member)?;
            }
            Ok(())
        })
        .unwrap();
    for holder in &holders[1..] {
        holder.with(|p| p.sync()).unwrap();
    }
    let until = Instant::now() + Duration::from_secs(3);
    let granted: Vec<Arc<AtomicU32>> = (0..PROCESSES).map(|_| Arc::default()).collect();
    let workers: Vec<_> = (0..PROCESSES * WORKERS)
        .map(|w| {
            let (holder, granted) = (holders[w % PROCESSES].clone(), granted[w % PROCESSES].clone());
            std::thread::spawn(move || {
                while Instant::now() < until {
                    let timeout = Some(2 * SECOND);
                    let lease = holder.acquire("chat", &Selector::default(), timeout, || Ok::<_, Error>(())).unwrap();
                    granted.fetch_add(1, Ordering::Relaxed);
                    std::thread::sleep(Duration::from_millis(5));
                    lease.release().unwrap();
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join().unwrap();
    }
    let shares: Vec<u32> = granted.iter().map(|g| g.load(Ordering::Relaxed)).collect();
    let fair = f64::from(shares.iter().sum::<u32>()) / PROCESSES as f64;
    assert!(fair >= 20.0, "the processes took turns: {shares:?}");
    for share in &shares {
        assert!((f64::from(*share) - fair).abs() <= 0.2 * fair, "{shares:?}: each within 20 % of {fair:.0}");
    }
    for holder in holders {
        holder.close(false).unwrap();
    }
    shares
}

/// A pool refused at a group's concurrency waits in its line at the store,
/// and hears of the release that frees the slot in another process; a
/// release while nobody waits tells nobody.
pub fn a_release_tells_the_pools_waiting_in_line(open: &Opener, store: &dyn Backend) {
    let t = tenant("told");
    let mut holder = open(&t, Policy::default());
    holder.set_group("capped", &GroupLimits { concurrency: Some(1), ..GroupLimits::default() }).unwrap();
    let member = Registration { groups: vec![GroupName::new("capped").unwrap()], ..Registration::new(1) };
    for key in ["k1", "k2"] {
        holder.register_with("key", key, &member).unwrap();
    }
    let held = holder.acquire("chat").unwrap();
    let sharing = Sharing { mode: Mode::Shared, ..Sharing::default() };
    let config = TenantConfig { durable: true, ..TenantConfig::default() };
    let mut waiter = EmbeddedPool::open(store, &sharing, &t, config, Arc::new(SystemClock::new())).unwrap();
    let mut releases = waiter.take_releases().expect("a shared store tells of releases");
    let mut refused = || {
        let refused = waiter.serve().unwrap().acquire("chat");
        assert!(matches!(refused, Err(Error::NoResourceAvailable { .. })), "the slot is taken: {refused:?}");
    };
    refused();
    assert!(!releases.next(Duration::from_millis(100)).unwrap(), "nothing was released yet");
    // Asking again keeps the pool's place (it lapses 250 ms after its last ask).
    refused();
    holder.release(held.id, held.token).unwrap();
    assert!(releases.next(Duration::from_secs(2)).unwrap(), "the waiter hears of the release");
    // A sync asks the store again about the group it held out (as the
    // holder does on hearing), so the slot is granted at once.
    waiter.serve().unwrap().sync().unwrap();
    let granted = waiter.serve().unwrap().acquire("chat").unwrap();
    waiter.serve().unwrap().release(granted.id, granted.token).unwrap();
    let again = holder.acquire("chat").unwrap();
    holder.release(again.id, again.token).unwrap();
    assert!(!releases.next(Duration::from_millis(200)).unwrap(), "nobody waits, nobody is told");
}

/// Two processes grant members of one group: each process's view of the
/// group counts what the store counts (the minute and day windows and the
/// live leases the group's limits keep), not its own grants alone; a group
/// with no limit on a count keeps the process's own.
pub fn the_group_views_count_every_process(open: &Opener) {
    let t = tenant("group-views");
    let (mut a, mut b) = (open(&t, Policy::default()), open(&t, Policy::default()));
    let project = GroupName::new("project").unwrap();
    let limits = GroupLimits { rpm: Some(50), rpd: Some(500), concurrency: Some(10), ..GroupLimits::default() };
    a.set_group("project", &limits).unwrap();
    let free = GroupName::new("free").unwrap();
    for (key, group) in [("k1", &project), ("k2", &project), ("k3", &free)] {
        let member = Registration { groups: vec![group.clone()], ..Registration::new(2) };
        a.register_with("key", key, &member).unwrap();
    }
    b.sync().unwrap();
    let only = |key: &str| Selector {
        exclude: ["k1", "k2", "k3"].iter().filter(|k| **k != key).map(|k| (*k).into()).collect(),
        ..Selector::default()
    };
    let held_a = a.acquire_with("chat", &only("k1")).unwrap();
    let done = a.acquire_with("chat", &only("k2")).unwrap();
    a.release(done.id, done.token).unwrap();
    let held_b = b.acquire_with("chat", &only("k2")).unwrap();
    let free_a = a.acquire_with("chat", &only("k3")).unwrap();
    for (name, pool) in [("a", &mut a), ("b", &mut b)] {
        let views = pool.groups().unwrap();
        let view = views.iter().find(|g| g.name == project).unwrap();
        assert_eq!(view.window.grants, 3, "{name}: the minute holds both processes' grants");
        assert_eq!(view.day.grants, 3, "{name}: so does the day");
        assert_eq!(view.leased, 2, "{name}: live leases of both processes");
        let unlimited = views.iter().find(|g| g.name == free).map_or(0, |g| g.leased);
        assert_eq!(unlimited, u32::from(name == "a"), "{name}: a group without limits counts its own process");
    }
    for lease in [held_a, free_a] {
        a.release(lease.id, lease.token).unwrap();
    }
    b.release(held_b.id, held_b.token).unwrap();
    assert_eq!(b.groups().unwrap().iter().find(|g| g.name == project).unwrap().leased, 0);
}

/// The store's data carried over to another server (`carry_over`: a
/// promoted replica, a restart that may have lost the last writes): every
/// lease the earlier history granted is waited out before a permit is
/// granted again, its holder cannot renew it, and tokens start above the
/// server's clock at the change, so none granted before can come again.
pub fn a_new_history_waits_out_its_leases_and_lifts_the_token_floor(open: &Opener, carry_over: &dyn Fn(&str)) {
    let t = tenant("history");
    let ttl = SECOND * 6 / 10;
    let policy = Policy { lease_ttl: ttl, ..Policy::default() };
    let mut holder = open(&t, policy.clone());
    holder.register("proxy", "only", 1).unwrap();
    let held = holder.acquire("shop").unwrap();
    let mut other = open(&t, policy);

    carry_over(&t);
    let changed = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_micros() as u64;
    let retry_after = match other.acquire("shop") {
        Err(Error::Store(StoreError::Recovering { retry_after })) => retry_after,
        refused => panic!("a grant right after the change waits for the old leases to expire: {refused:?}"),
    };
    assert!(retry_after > ttl / 2 && retry_after <= ttl, "waits out one lease TTL: {retry_after} ns");
    let renewed = holder.renew(held.id, held.token);
    assert!(matches!(renewed, Err(Error::LeaseExpired)), "the old holder learns its lease is gone: {renewed:?}");

    std::thread::sleep(std::time::Duration::from_nanos(retry_after));
    let lease = other.acquire("shop").unwrap();
    assert!(lease.token > changed, "token {} starts above the clock at the change ({changed} µs)", lease.token);
    other.release(lease.id, lease.token).unwrap();
    let again = other.acquire("shop").unwrap();
    assert_eq!(again.token, lease.token + 1, "and rises by one from there");
}

/// Four pools report concurrently; after a sync, they and a fresh pool
/// agree on every cell, which only the same order of the same reports gives.
pub fn every_copy_folds_the_log_in_the_same_order(open: &Opener) {
    let t = tenant("fold");
    {
        let mut setup = open(&t, Policy::default());
        setup.register("proxy", "a", 1).unwrap();
        setup.register("proxy", "b", 1).unwrap();
    }
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let (open, t) = (open.clone(), t.clone());
            std::thread::spawn(move || {
                let mut pool = open(&t, Policy::default());
                for i in 0..50 {
                    let outcome = Outcome::Success { latency_ms: (w * 50 + i) as f64 };
                    pool.report("proxy", if i % 2 == 0 { "a" } else { "b" }, "shop", &outcome).unwrap();
                }
                pool
            })
        })
        .collect();
    let mut pools: Vec<Pool> = writers.into_iter().map(|w| w.join().unwrap()).collect();
    pools.push(open(&t, Policy::default()));
    let views: Vec<Vec<(u64, i32, f64)>> = pools
        .iter_mut()
        .map(|p| {
            p.sync().unwrap();
            ["a", "b"]
                .iter()
                .flat_map(|r| p.cells("proxy", r).unwrap())
                .map(|c| (c.observations, c.score, c.latency_ms))
                .collect()
        })
        .collect();
    assert_eq!(views[0].iter().filter(|v| v.0 == 100).count(), 4, "200 reports, 100 per resource: {:?}", views[0]);
    for view in &views[1..] {
        assert_eq!(view, &views[0], "every copy folded the same log in the same order");
    }
}

/// Each pool's own bucket would admit the burst; together they get it once.
pub fn the_rate_limit_is_shared(open: &Opener) {
    let t = tenant("rate");
    let policy = Policy { rate_limit: Some(RateLimit { rate: 0.5, burst: 4 }), ..Policy::default() };
    let (mut a, mut b) = (open(&t, policy.clone()), open(&t, policy));
    a.register("proxy", "p1", 8).unwrap();
    b.sync().unwrap();
    let mut admitted = 0;
    let mut refused = Vec::new();
    for i in 0..8 {
        let pool = if i % 2 == 0 { &mut a } else { &mut b };
        match pool.acquire("shop") {
            Ok(_) => admitted += 1,
            Err(Error::RateLimited { retry_after }) => refused.push(retry_after),
            Err(e) => panic!("acquire {i}: {e}"),
        }
    }
    assert_eq!(admitted, 4);
    assert_eq!(refused.len(), 4);
    // One token every 2 s: the next is at most 2 s away.
    assert!(refused.iter().all(|&ns| ns > 0 && ns <= 2 * SECOND), "{refused:?}");
}

/// A copy that has not folded the stored checkpoint's changes cannot
/// replace it; caught up, any copy may.
pub fn a_checkpoint_behind_the_stored_one_is_refused(open: &Opener, stored: &dyn Fn(&str) -> Option<Checkpoint>) {
    let t = tenant("behind");
    let mut a = open(&t, Policy::default());
    let mut b = open(&t, Policy::default());
    a.register("proxy", "p1", 1).unwrap();
    assert_eq!(a.checkpoint(false).unwrap(), 1);
    assert_eq!(b.checkpoint(false), Err(Error::Store(StoreError::Conflict { expected: 0, found: 1 })));
    // The refused save wrote nothing: the stored checkpoint is A's.
    let checkpoint = stored(&t).expect("A's checkpoint");
    assert_eq!((checkpoint.version, checkpoint.log_seq), (1, 1));
    // A snapshot states resources' ages as of when it was taken: both are
    // compared as of one instant.
    let state = |bytes: &[u8]| repute_core::Pool::from_snapshot(bytes, 0).unwrap().snapshot(0, false);
    assert_eq!(state(&checkpoint.bytes), state(&a.snapshot(false).unwrap()));
    assert_eq!(b.sync().unwrap(), 1);
    assert_eq!(b.checkpoint(false).unwrap(), 2);
    assert_eq!(a.checkpoint(false).unwrap(), 3);
}

/// Another process unregisters a resource and registers one more; folded
/// here, the new one takes the freed slot of this pool. Leases must name it,
/// not the resource this host last saw in that slot.
pub fn a_slot_reused_by_another_process_names_the_new_resource(open: &Opener) {
    let t = tenant("reused-slot");
    let first = Policy { strategy: Strategy::First, ..Policy::default() };
    let mut here = open(&t, first.clone());
    here.register("proxy", "old", 1).unwrap();
    let lease = here.acquire("shop").unwrap();
    assert_eq!(lease.resource.value(), "old");
    here.release(lease.id, lease.token).unwrap();
    let mut there = open(&t, first);
    there.unregister("proxy", "old", false).unwrap();
    there.register("proxy", "new", 1).unwrap();
    assert_eq!(here.sync().unwrap(), 2);
    let lease = here.acquire("shop").unwrap();
    assert_eq!((lease.resource.value(), lease.token), ("new", 1));
}

/// A resource with rpm 2 is granted once per 30 s (its minute spread over
/// the minute): the second pool's own count has room, but the store,
/// counting the first pool's grant, refuses it with the wait, and each
/// pool then counts the resource limited.
pub fn usage_limits_hold_across_processes(open: &Opener) {
    let t = tenant("usage");
    let started = std::time::Instant::now();
    let first = Policy { strategy: Strategy::First, ..Policy::default() };
    let (mut a, mut b) = (open(&t, first.clone()), open(&t, first));
    let limits = Limits { rpm: Some(2), ..Limits::default() };
    a.register_with("key", "k1", &Registration { limits, ..Registration::new(1) }).unwrap();
    assert_eq!(b.sync().unwrap(), 1);
    let lease = a.acquire("chat").unwrap();
    a.release(lease.id, lease.token).unwrap();
    for pool in [&mut b, &mut a] {
        let Err(Error::NoResourceAvailable(r)) = pool.acquire("chat") else { panic!("the store refuses a second") };
        assert_eq!((r.registered, r.limited), (1, 1));
        let wait = r.retry_after.expect("the store says when");
        let elapsed = started.elapsed().as_nanos() as u64;
        let spacing = WINDOW / 2;
        assert!(wait <= spacing && wait >= spacing - elapsed, "retry after {wait} ns, {elapsed} ns after the first");
    }
}

/// Two pools each make one grant of a resource with a tpm: each pool's view
/// shows the store's window, both grants and their costs, not its own one;
/// a resource without an rpm or tpm shows an empty window.
pub fn the_views_show_the_window_of_every_process(open: &Opener) {
    let t = tenant("views");
    let (mut a, mut b) = (open(&t, Policy::default()), open(&t, Policy::default()));
    let limits = Limits { tpm: Some(100), ..Limits::default() };
    a.register_with("key", "k1", &Registration { limits, ..Registration::new(1) }).unwrap();
    a.register_with("key", "k2", &Registration::new(1)).unwrap();
    assert_eq!(b.sync().unwrap(), 2);
    let on_k1 = |cost| Selector { exclude: vec!["k2".into()], cost: Some(cost), ..Selector::default() };
    for (pool, cost) in [(&mut a, 10), (&mut b, 20)] {
        let lease = pool.acquire_with("chat", &on_k1(cost)).unwrap();
        pool.release(lease.id, lease.token).unwrap();
    }
    for pool in [&mut a, &mut b] {
        let views = pool.resources().unwrap();
        assert_eq!(views[0].window, Window { grants: 2, tokens: 30 }, "the store's count");
        assert_eq!(views[1].window, Window::default());
    }
}
