//! Usage limits at the lease authority, what every store must show, written
//! once and run against each (`usage_limit_tests!`; memory and SQLite here,
//! PostgreSQL and Redis in their files, each connection a process of its
//! own there): connections racing for one resource get exactly `rpm` grants
//! of a window and the others the exact wait; `tpm` counts costs and what
//! they reconciled to; `min_interval` spaces grants; spent `max_uses`
//! refuse for good; a held permit counts nothing; what left the window
//! is pruned by the next grant; per-context limits count each context
//! of a resource apart, beside the resource's own; a quota group's rpm holds
//! across its members for connections racing on three of them, its
//! concurrency caps the live leases across them (a revoke frees a slot),
//! its tpm and tpd count costs reconciled to use; a resource's rpd and a
//! group's tpd count a day and refuse with the day's wait, and a day's
//! grants still count after a restart of the authority; and every case of
//! the core's table of the usage rule is answered as the core's rule
//! answers it. Then the same limits through the pool: an embedded SQLite
//! pool remembers the grants of the minute before a restart (and a group's
//! day), the holder reconciles and reports usage, and refusals count
//! limited resources.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use repute_host::providers::{Fencing, MemoryFencing, Permit, SqliteStorage};
use repute_host::{
    Claim, Context, ContextLimits, Error, EventKind, GrantAnswer, Holder, Limits, ManualClock, OpenOptions, Outcome,
    Pool, PoolOps, Providers, Registration, RetireReason, Selector, StoreError, SystemClock, TenantConfig, Window,
    SECOND, WINDOW,
};

use repute_core::usage::cases::{Step, CASES};
use repute_core::usage::Verdict;
use repute_core::{GroupClaim, GroupLimits, GroupName, DAY};

use crate::shared_store::tenant;

/// One store as the suite drives it.
pub trait Store: Send + Sync {
    /// A connection to `tenant`'s lease authority: a process of its own
    /// where the store is shared, the one authority of the tenant where not.
    fn connect(&self, tenant: &str) -> Box<dyn Fencing>;
    /// The `now` callers pass (stores on their own clock ignore it).
    fn now(&self) -> u64;
    /// Makes every grant `tenant`'s authority counted `ns` older.
    fn age(&self, tenant: &str, ns: u64);
    /// Grants `tenant`'s authority keeps in its windows, where the suite can see them.
    fn kept(&self, tenant: &str) -> Option<usize>;
    /// Ends `tenant`'s authority as a process's end would (its
    /// connections were dropped) so that the next `connect` starts it
    /// anew; false where nothing outlives the process.
    fn restart(&self, tenant: &str) -> bool;
    /// How long a refusal at a group's full concurrency waits, when the
    /// soonest lease expires in `ttl`: processes sharing the store keep a
    /// line there and ask again within 20 ms to keep their place.
    fn concurrency_wait(&self, ttl: u64) -> u64 {
        ttl
    }
}

/// What a store that several processes share answers for
/// [`Store::concurrency_wait`].
pub const LINE_POLL: u64 = 20_000_000;

/// The suite as `#[test]` functions of a store's test file; `$store()`
/// gives the store.
macro_rules! usage_limit_tests {
    (store: $store:expr) => {
        #[test]
        fn connections_racing_for_one_resource_get_exactly_rpm_grants() {
            crate::usage_limits::racing_connections_get_exactly_rpm(&$store);
        }

        #[test]
        fn tpm_counts_costs_and_what_they_reconciled_to() {
            crate::usage_limits::tpm_counts_costs_and_reconciled_use(&$store);
        }

        #[test]
        fn min_interval_spaces_grants() {
            crate::usage_limits::min_interval_spaces_grants(&$store);
        }

        #[test]
        fn spent_max_uses_refuse_for_good() {
            crate::usage_limits::spent_max_uses_refuse_for_good(&$store);
        }

        #[test]
        fn a_held_permit_counts_nothing() {
            crate::usage_limits::a_held_permit_counts_nothing(&$store);
        }

        #[test]
        fn grants_that_left_the_window_are_pruned_by_the_next() {
            crate::usage_limits::grants_that_left_the_window_are_pruned(&$store);
        }

        #[test]
        fn a_refused_claim_prunes_what_left_the_window_for_good() {
            crate::usage_limits::a_refused_claim_prunes_for_good(&$store);
        }

        #[test]
        fn connections_racing_for_one_context_get_exactly_its_rpm() {
            crate::usage_limits::racing_connections_get_exactly_a_contexts_rpm(&$store);
        }

        #[test]
        fn per_context_limits_count_each_context_apart() {
            crate::usage_limits::per_context_limits_count_each_context_apart(&$store);
        }

        #[test]
        fn the_window_read_counts_grants_and_costs_without_writing() {
            crate::usage_limits::the_window_read_counts_grants_and_costs(&$store);
        }

        #[test]
        fn the_core_rules_cases_hold() {
            crate::usage_limits::the_core_rules_cases_hold(&$store);
        }

        crate::usage_limits::group_limit_tests!(store: $store);
    };
}
pub(crate) use usage_limit_tests;

/// Quota groups and day windows, part of `usage_limit_tests!`.
macro_rules! group_limit_tests {
    (store: $store:expr) => {
        #[test]
        fn connections_racing_on_a_groups_members_get_exactly_its_rpm() {
            crate::usage_limits::racing_connections_get_exactly_a_groups_rpm(&$store);
        }

        #[test]
        fn a_groups_concurrency_caps_live_leases_across_its_members() {
            crate::usage_limits::a_groups_concurrency_caps_live_leases(&$store);
        }

        #[test]
        fn a_groups_tpm_and_tpd_count_reconciled_use() {
            crate::usage_limits::a_groups_tpm_and_tpd_count_reconciled_use(&$store);
        }

        #[test]
        fn rpd_and_a_groups_tpd_count_a_day() {
            crate::usage_limits::rpd_and_a_groups_tpd_count_a_day(&$store);
        }

        #[test]
        fn a_day_window_holds_across_a_restart() {
            crate::usage_limits::a_day_window_holds_across_a_restart(&$store);
        }
    };
}
pub(crate) use group_limit_tests;

const TTL: u64 = 30 * SECOND;

fn permit(index: u32) -> Permit<'static> {
    Permit { kind: "key", value: "k1", index }
}

fn claim(limits: Limits, cost: u64) -> Claim {
    Claim { limits, cost, context: None, groups: Vec::new() }
}

/// A claim of a grant for `context`, whose `per_context` limits count it.
fn claim_in(context: &str, limits: Limits, cost: u64) -> Claim {
    Claim { limits, cost, context: Some(Context::new(context).unwrap()), groups: Vec::new() }
}

/// Permit `index` of key `value`.
fn permit_of(value: &'static str, index: u32) -> Permit<'static> {
    Permit { kind: "key", value, index }
}

/// A claim of a resource without limits of its own in group `name`.
fn claim_grouped(name: &str, limits: Limits, concurrency: Option<u32>, cost: u64) -> Claim {
    let group = GroupClaim { name: GroupName::new(name).unwrap(), limits, concurrency };
    Claim { limits: Limits::default(), cost, context: None, groups: vec![group] }
}

/// As `ask`, on permit `p`.
fn ask_at(store: &dyn Store, a: &mut dyn Fencing, p: Permit<'_>, c: &Claim) -> GrantAnswer {
    let answer = a.grant(p, TTL, 0, store.now(), Some(c), 0).unwrap();
    if let GrantAnswer::Granted(token) = answer {
        a.revoke(p, token).unwrap();
    }
    answer
}

/// `answer` is `GroupLimited(group, wait)` with `wait` as in `assert_wait`.
fn assert_group_wait(answer: GrantAnswer, group: u32, full: u64, slack: Duration) {
    let GrantAnswer::GroupLimited(index, wait) = answer else { panic!("expected a group's wait, got {answer:?}") };
    assert_eq!(index, group, "the group that refused");
    assert_wait(GrantAnswer::Limited(Some(wait)), full, slack);
}

/// A grant of `index` that, when granted, is revoked again at once: the
/// limits alone decide the next answer.
fn ask(store: &dyn Store, a: &mut dyn Fencing, index: u32, c: &Claim) -> GrantAnswer {
    let answer = a.grant(permit(index), TTL, 0, store.now(), Some(c), 0).unwrap();
    if let GrantAnswer::Granted(token) = answer {
        a.revoke(permit(index), token).unwrap();
    }
    answer
}

/// `answer` is `Limited(Some(wait))` with `wait` in `[full - slack, full]`:
/// the store's clock ran at most `slack` since the grant it waits for.
fn assert_wait(answer: GrantAnswer, full: u64, slack: Duration) {
    let GrantAnswer::Limited(Some(wait)) = answer else { panic!("expected a wait of about {full} ns, got {answer:?}") };
    let floor = full.saturating_sub(slack.as_nanos() as u64);
    assert!((floor..=full).contains(&wait), "waits {wait} ns, expected {floor}..={full}");
}

/// `answer` is `ContextLimited(wait)` with `wait` as in `assert_wait`.
fn assert_context_wait(answer: GrantAnswer, full: u64, slack: Duration) {
    let GrantAnswer::ContextLimited(wait) = answer else { panic!("expected a context's wait, got {answer:?}") };
    assert_wait(GrantAnswer::Limited(Some(wait)), full, slack);
}

/// Six connections of `t`, each on a permit of its own, ask ten times each
/// at once with claim `c`; their answers.
fn race(store: &dyn Store, t: &str, c: &Claim) -> Vec<GrantAnswer> {
    let barrier = Barrier::new(6);
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..6u32)
            .map(|i| {
                let barrier = &barrier;
                s.spawn(move || {
                    let mut a = store.connect(t);
                    barrier.wait();
                    (0..10).map(|_| ask(store, &mut *a, i, c)).collect::<Vec<_>>()
                })
            })
            .collect();
        workers.into_iter().flat_map(|w| w.join().unwrap()).collect()
    })
}

/// Racing for a resource with rpm 8: the store grants exactly 8, and every
/// other answer is the wait until the oldest grant leaves the window.
pub fn racing_connections_get_exactly_rpm(store: &dyn Store) {
    let t = tenant("race");
    let c = claim(Limits { rpm: Some(8), ..Limits::default() }, 1);
    let started = Instant::now();
    let answers = race(store, &t, &c);
    let granted = answers.iter().filter(|a| matches!(a, GrantAnswer::Granted(_))).count();
    assert_eq!(granted, 8, "{answers:?}");
    for refused in answers.iter().filter(|a| !matches!(a, GrantAnswer::Granted(_))) {
        assert_wait(*refused, WINDOW, started.elapsed());
    }
    let mut late = store.connect(&t);
    assert_wait(ask(store, &mut *late, 6, &c), WINDOW, started.elapsed());
    assert_eq!(store.kept(&t).unwrap_or(8), 8, "one window entry a grant");
}

/// The same race for a context's own rpm of 5 on a resource with no limits
/// of its own: exactly 5, the others the context's wait.
pub fn racing_connections_get_exactly_a_contexts_rpm(store: &dyn Store) {
    let t = tenant("race-context");
    let per = ContextLimits { rpm: Some(5), ..ContextLimits::default() };
    let c = claim_in("gpt", Limits { per_context: per, ..Limits::default() }, 1);
    let started = Instant::now();
    let answers = race(store, &t, &c);
    let granted = answers.iter().filter(|a| matches!(a, GrantAnswer::Granted(_))).count();
    assert_eq!(granted, 5, "{answers:?}");
    for refused in answers.iter().filter(|a| !matches!(a, GrantAnswer::Granted(_))) {
        assert_context_wait(*refused, WINDOW, started.elapsed());
    }
}

/// A resource with rpm 4 whose contexts each have rpm 5 and tpm 10, over
/// two connections: a context's tokens are its own, reconciled in its
/// window; a cost over a context's tpm never fits; the resource's rpm
/// holds across contexts with the resource's wait.
pub fn per_context_limits_count_each_context_apart(store: &dyn Store) {
    let t = tenant("per-context");
    let per = ContextLimits { rpm: Some(5), tpm: Some(10), ..ContextLimits::default() };
    let limits = Limits { rpm: Some(4), per_context: per, ..Limits::default() };
    let (mut a, mut b) = (store.connect(&t), store.connect(&t));
    let started = Instant::now();
    let GrantAnswer::Granted(first) = ask(store, &mut *a, 0, &claim_in("gpt", limits, 6)) else { panic!("granted") };
    assert_context_wait(ask(store, &mut *b, 1, &claim_in("gpt", limits, 6)), WINDOW, started.elapsed());
    a.reconcile(permit(0), Some("gpt"), first, 6, 2).unwrap();
    assert!(matches!(ask(store, &mut *b, 1, &claim_in("gpt", limits, 6)), GrantAnswer::Granted(_)), "2 + 6 fit");
    assert_eq!(ask(store, &mut *a, 2, &claim_in("claude", limits, 11)), GrantAnswer::Held, "never fits");
    assert!(matches!(ask(store, &mut *a, 2, &claim_in("claude", limits, 6)), GrantAnswer::Granted(_)));
    assert!(matches!(ask(store, &mut *b, 3, &claim_in("o1", limits, 1)), GrantAnswer::Granted(_)));
    assert_wait(ask(store, &mut *a, 3, &claim_in("o3", limits, 1)), WINDOW, started.elapsed());
    store.age(&t, WINDOW);
    assert!(matches!(ask(store, &mut *b, 0, &claim_in("gpt", limits, 10)), GrantAnswer::Granted(_)));
}

/// Five grants of costs 1..=5 on a resource with rpm 10 and tpm 100, one
/// reconciled, and one of another resource: the read gives each resource
/// exactly its grants and tokens, writes nothing (reading twice, then
/// granting, counts as before), and gives nothing once the window passed.
pub fn the_window_read_counts_grants_and_costs(store: &dyn Store) {
    let t = tenant("window");
    let (mut a, mut b) = (store.connect(&t), store.connect(&t));
    let limits = Limits { rpm: Some(10), tpm: Some(100), ..Limits::default() };
    let resources = [("key", "k1"), ("key", "k2"), ("key", "none")];
    assert_eq!(a.window(&resources, store.now()).unwrap(), vec![Window::default(); 3], "nothing granted yet");
    let mut first = 0;
    for cost in 1..=5 {
        let GrantAnswer::Granted(token) = ask(store, &mut *a, cost as u32, &claim(limits, cost)) else {
            panic!("granted")
        };
        first = if cost == 1 { token } else { first };
    }
    a.reconcile(permit(1), None, first, 1, 7).unwrap();
    let other = b.grant(Permit { kind: "key", value: "k2", index: 0 }, TTL, 0, store.now(), Some(&claim(limits, 9)), 0);
    assert!(matches!(other.unwrap(), GrantAnswer::Granted(_)));
    let expected =
        vec![Window { grants: 5, tokens: 7 + 2 + 3 + 4 + 5 }, Window { grants: 1, tokens: 9 }, Window::default()];
    assert_eq!(b.window(&resources, store.now()).unwrap(), expected, "read from another connection");
    assert_eq!(a.window(&resources, store.now()).unwrap(), expected, "reading twice reads the same");
    assert!(matches!(ask(store, &mut *a, 0, &claim(limits, 79)), GrantAnswer::Granted(_)), "21 + 79 fit in 100");
    assert_eq!(a.window(&resources[..1], store.now()).unwrap(), vec![Window { grants: 6, tokens: 100 }]);
    store.age(&t, WINDOW);
    assert_eq!(a.window(&resources, store.now()).unwrap(), vec![Window::default(); 3], "the window passed");
}

pub fn tpm_counts_costs_and_reconciled_use(store: &dyn Store) {
    let t = tenant("tpm");
    let mut a = store.connect(&t);
    let limits = Limits { tpm: Some(100), ..Limits::default() };
    let started = Instant::now();
    let GrantAnswer::Granted(first) = ask(store, &mut *a, 0, &claim(limits, 60)) else { panic!("60 of 100 fit") };
    assert_wait(ask(store, &mut *a, 1, &claim(limits, 60)), WINDOW, started.elapsed());
    // The first grant used 20 tokens, not 60: 80 of 100 now fit.
    a.reconcile(permit(0), None, first, 60, 20).unwrap();
    assert!(matches!(ask(store, &mut *a, 1, &claim(limits, 60)), GrantAnswer::Granted(_)));
    assert_wait(ask(store, &mut *a, 2, &claim(limits, 30)), WINDOW, started.elapsed());
    assert_eq!(ask(store, &mut *a, 2, &claim(limits, 101)), GrantAnswer::Held, "a cost over the tpm never fits");
    assert!(matches!(ask(store, &mut *a, 2, &claim(limits, 20)), GrantAnswer::Granted(_)), "20 + 60 + 20 fit");
    store.age(&t, WINDOW);
    assert!(matches!(ask(store, &mut *a, 2, &claim(limits, 100)), GrantAnswer::Granted(_)), "the window emptied");
    // A reconcile of a grant that left the window changes nothing.
    a.reconcile(permit(0), None, first, 60, 0).unwrap();
    assert_wait(ask(store, &mut *a, 0, &claim(limits, 1)), WINDOW, started.elapsed());
}

pub fn min_interval_spaces_grants(store: &dyn Store) {
    let t = tenant("gap");
    let mut a = store.connect(&t);
    let c = claim(Limits { min_interval: Some(10 * SECOND), ..Limits::default() }, 1);
    let started = Instant::now();
    assert!(matches!(ask(store, &mut *a, 0, &c), GrantAnswer::Granted(1)));
    assert_wait(ask(store, &mut *a, 1, &c), 10 * SECOND, started.elapsed());
    store.age(&t, 10 * SECOND);
    assert!(matches!(ask(store, &mut *a, 1, &c), GrantAnswer::Granted(1)));
    assert_eq!(store.kept(&t).unwrap_or(0), 0, "min_interval keeps no window");
}

pub fn spent_max_uses_refuse_for_good(store: &dyn Store) {
    let t = tenant("uses");
    let mut a = store.connect(&t);
    let c = claim(Limits { max_uses: Some(2), ..Limits::default() }, 1);
    assert!(matches!(ask(store, &mut *a, 0, &c), GrantAnswer::Granted(1)));
    assert!(matches!(ask(store, &mut *a, 1, &c), GrantAnswer::Granted(1)));
    assert_eq!(ask(store, &mut *a, 2, &c), GrantAnswer::Limited(None));
    store.age(&t, 2 * WINDOW);
    let mut b = store.connect(&t);
    assert_eq!(ask(store, &mut *b, 0, &c), GrantAnswer::Limited(None), "for every connection, whenever");
}

pub fn a_held_permit_counts_nothing(store: &dyn Store) {
    let t = tenant("held");
    let mut a = store.connect(&t);
    let c = claim(Limits { rpm: Some(1), max_uses: Some(1), ..Limits::default() }, 1);
    let started = Instant::now();
    let held = a.grant(permit(0), TTL, 0, store.now(), Some(&c), 0).unwrap();
    assert_eq!(held, GrantAnswer::Granted(1));
    // Held comes first: the permit is taken, whatever the limits say.
    assert_eq!(a.grant(permit(0), TTL, 1, store.now(), Some(&c), 0).unwrap(), GrantAnswer::Held);
    assert_eq!(ask(store, &mut *a, 1, &c), GrantAnswer::Limited(None), "max_uses, before rpm");
    let c = claim(Limits { rpm: Some(1), ..Limits::default() }, 1);
    assert_wait(ask(store, &mut *a, 1, &c), WINDOW, started.elapsed());
    assert_eq!(store.kept(&t).unwrap_or(1), 1, "the refusals were not counted");
}

pub fn grants_that_left_the_window_are_pruned(store: &dyn Store) {
    let t = tenant("prune");
    let mut a = store.connect(&t);
    let c = claim(Limits { rpm: Some(3), tpm: Some(30), ..Limits::default() }, 10);
    for i in 0..3 {
        assert!(matches!(ask(store, &mut *a, i, &c), GrantAnswer::Granted(_)), "grant {i}");
    }
    assert_eq!(store.kept(&t).unwrap_or(3), 3);
    store.age(&t, WINDOW);
    for i in 0..3 {
        assert!(matches!(ask(store, &mut *a, i, &c), GrantAnswer::Granted(_)), "grant {i} of the next window");
    }
    assert_eq!(store.kept(&t).unwrap_or(3), 3, "the first window's grants are gone");
    assert!(matches!(ask(store, &mut *a, 3, &c), GrantAnswer::Limited(Some(_))));
}

/// A claim refused after the grants that left the window were pruned
/// leaves the count without them: the next claim that fits is granted.
pub fn a_refused_claim_prunes_for_good(store: &dyn Store) {
    let t = tenant("prune-refused");
    let mut a = store.connect(&t);
    let limits = Limits { tpm: Some(30), ..Limits::default() };
    assert!(matches!(ask(store, &mut *a, 0, &claim(limits, 10)), GrantAnswer::Granted(_)));
    store.age(&t, WINDOW / 2);
    let started = Instant::now();
    for i in 1..3 {
        assert!(matches!(ask(store, &mut *a, i, &claim(limits, 10)), GrantAnswer::Granted(_)), "grant {i}");
    }
    store.age(&t, WINDOW / 2);
    // The first grant left: 20 counted, and 20 + 30 do not fit.
    assert_wait(ask(store, &mut *a, 0, &claim(limits, 30)), WINDOW / 2, started.elapsed());
    assert!(matches!(ask(store, &mut *a, 0, &claim(limits, 10)), GrantAnswer::Granted(_)), "20 + 10 fit");
    assert_wait(ask(store, &mut *a, 1, &claim(limits, 1)), WINDOW / 2, started.elapsed());
}

/// Six connections, two on each of three keys of one group with rpm 7
/// (and no limits of their own), ask ten times each at once: the store
/// grants exactly 7 across the keys, every other answer is the group's
/// wait until the oldest grant leaves the minute. The group's limits are
/// judged as claimed: unpaced here, so a burst may take the whole minute.
pub fn racing_connections_get_exactly_a_groups_rpm(store: &dyn Store) {
    let t = tenant("race-group");
    let t = t.as_str();
    let c = claim_grouped("project", Limits { rpm: Some(7), ..Limits::default() }, None, 1);
    let keys = ["k1", "k2", "k3"];
    let barrier = Barrier::new(6);
    let started = Instant::now();
    let answers: Vec<GrantAnswer> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..6u32)
            .map(|i| {
                let (barrier, c) = (&barrier, &c);
                s.spawn(move || {
                    let mut a = store.connect(t);
                    barrier.wait();
                    let p = permit_of(keys[i as usize % 3], i / 3);
                    (0..10).map(|_| ask_at(store, &mut *a, p, c)).collect::<Vec<_>>()
                })
            })
            .collect();
        workers.into_iter().flat_map(|w| w.join().unwrap()).collect()
    });
    let granted = answers.iter().filter(|a| matches!(a, GrantAnswer::Granted(_))).count();
    assert_eq!(granted, 7, "{answers:?}");
    for refused in answers.iter().filter(|a| !matches!(a, GrantAnswer::Granted(_))) {
        assert_group_wait(*refused, 0, WINDOW, started.elapsed());
    }
    let mut late = store.connect(t);
    assert_group_wait(ask_at(store, &mut *late, permit_of("k4", 0), &c), 0, WINDOW, started.elapsed());
    let other = claim_grouped("other", Limits { rpm: Some(7), ..Limits::default() }, None, 1);
    assert!(matches!(ask_at(store, &mut *late, permit_of("k1", 0), &other), GrantAnswer::Granted(_)));
}

/// Six connections on three keys of a group with concurrency 2, each
/// holding what it is granted a moment before revoking it: never more than
/// 2 live at once, and every refusal is the group's, waiting for a lease's
/// TTL at most. Then two held leases refuse a third until one is revoked;
/// an extended one keeps its slot.
pub fn a_groups_concurrency_caps_live_leases(store: &dyn Store) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let t = tenant("group-concurrency");
    let t = t.as_str();
    let c = claim_grouped("account", Limits::default(), Some(2), 1);
    let keys = ["k1", "k2", "k3"];
    let (barrier, live, most, granted) =
        (Barrier::new(6), AtomicUsize::new(0), AtomicUsize::new(0), AtomicUsize::new(0));
    std::thread::scope(|s| {
        for i in 0..6u32 {
            let (barrier, c, live, most, granted) = (&barrier, &c, &live, &most, &granted);
            s.spawn(move || {
                let mut a = store.connect(t);
                barrier.wait();
                let p = permit_of(keys[i as usize % 3], i / 3);
                for _ in 0..10 {
                    match a.grant(p, TTL, 0, store.now(), Some(c), 0).unwrap() {
                        GrantAnswer::Granted(token) => {
                            let now = live.fetch_add(1, Ordering::SeqCst) + 1;
                            most.fetch_max(now, Ordering::SeqCst);
                            granted.fetch_add(1, Ordering::SeqCst);
                            std::thread::sleep(Duration::from_millis(2));
                            live.fetch_sub(1, Ordering::SeqCst);
                            a.revoke(p, token).unwrap();
                        }
                        GrantAnswer::GroupLimited(0, wait) => assert!((1..=TTL).contains(&wait), "waits {wait}"),
                        other => panic!("answered {other:?}"),
                    }
                }
            });
        }
    });
    assert!(most.load(Ordering::SeqCst) <= 2, "{} live at once", most.load(Ordering::SeqCst));
    assert!(granted.load(Ordering::SeqCst) >= 2, "some were granted");
    // The connections refused above hold places in the group's line until
    // 250 ms after their last ask, ahead of the one below.
    std::thread::sleep(Duration::from_millis(300));
    let mut a = store.connect(t);
    let started = Instant::now();
    let GrantAnswer::Granted(first) = a.grant(permit_of("k1", 0), TTL, 0, store.now(), Some(&c), 0).unwrap() else {
        panic!("a slot is free")
    };
    let GrantAnswer::Granted(second) = a.grant(permit_of("k2", 0), TTL, 0, store.now(), Some(&c), 0).unwrap() else {
        panic!("a second slot is free")
    };
    let third = a.grant(permit_of("k3", 0), TTL, 0, store.now(), Some(&c), 0).unwrap();
    assert_group_wait(third, 0, store.concurrency_wait(TTL), started.elapsed());
    assert!(a.extend(permit_of("k2", 0), second, TTL, store.now()).unwrap());
    let third = a.grant(permit_of("k3", 0), TTL, 0, store.now(), Some(&c), 0).unwrap();
    assert_group_wait(third, 0, store.concurrency_wait(TTL), started.elapsed());
    a.revoke(permit_of("k1", 0), first).unwrap();
    let GrantAnswer::Granted(third) = a.grant(permit_of("k3", 0), TTL, 0, store.now(), Some(&c), 0).unwrap() else {
        panic!("the revoke freed a slot")
    };
    a.revoke(permit_of("k2", 0), second).unwrap();
    a.revoke(permit_of("k3", 0), third).unwrap();
}

/// A group with tpm 100 and tpd 150 over two keys: a cost over either
/// never fits; the costs of both keys count together, a reconcile gives
/// tokens back in both windows, and the day refuses with the day's wait.
pub fn a_groups_tpm_and_tpd_count_reconciled_use(store: &dyn Store) {
    let t = tenant("group-tokens");
    let limits = Limits { tpm: Some(100), tpd: Some(150), ..Limits::default() };
    let c = |cost| claim_grouped("project", limits, None, cost);
    let (mut a, mut b) = (store.connect(&t), store.connect(&t));
    let started = Instant::now();
    assert_eq!(ask_at(store, &mut *a, permit_of("k1", 0), &c(101)), GrantAnswer::Held, "over the tpm");
    let GrantAnswer::Granted(first) = ask_at(store, &mut *a, permit_of("k1", 0), &c(60)) else { panic!("60 fit") };
    assert_group_wait(ask_at(store, &mut *b, permit_of("k2", 0), &c(60)), 0, WINDOW, started.elapsed());
    a.reconcile(permit_of("k1", 0), None, first, 60, 20).unwrap();
    let GrantAnswer::Granted(_) = ask_at(store, &mut *b, permit_of("k2", 0), &c(60)) else { panic!("20 + 60 fit") };
    // Past the minute and the day's bucket of the first grants, the day
    // holds 80 of 150.
    store.age(&t, 2 * WINDOW);
    let GrantAnswer::Granted(third) = ask_at(store, &mut *a, permit_of("k1", 0), &c(70)) else { panic!("80 + 70") };
    let day_wait = ask_at(store, &mut *b, permit_of("k2", 0), &c(10));
    assert_group_wait(day_wait, 0, DAY - 2 * WINDOW, started.elapsed());
    a.reconcile(permit_of("k1", 0), None, third, 70, 30).unwrap();
    assert!(matches!(ask_at(store, &mut *b, permit_of("k2", 0), &c(40)), GrantAnswer::Granted(_)), "80 + 30 + 40");
}

/// A resource with rpd 2 and a group with tpd 100: each counts a whole
/// day, minutes after the grants, and refuses with the day's wait.
pub fn rpd_and_a_groups_tpd_count_a_day(store: &dyn Store) {
    let t = tenant("day");
    let mut a = store.connect(&t);
    let started = Instant::now();
    let c = claim(Limits { rpd: Some(2), ..Limits::default() }, 1);
    assert!(matches!(ask(store, &mut *a, 0, &c), GrantAnswer::Granted(_)));
    assert!(matches!(ask(store, &mut *a, 1, &c), GrantAnswer::Granted(_)));
    store.age(&t, 10 * WINDOW);
    // The day's buckets hold each grant back by less than a bucket.
    let slack = started.elapsed() + Duration::from_nanos(repute_core::usage::DayWindow::BUCKET);
    assert_wait(ask(store, &mut *a, 2, &c), DAY - 10 * WINDOW, slack);
    let g = |cost| claim_grouped("project", Limits { tpd: Some(100), ..Limits::default() }, None, cost);
    assert!(matches!(ask_at(store, &mut *a, permit_of("k2", 0), &g(60)), GrantAnswer::Granted(_)));
    store.age(&t, 10 * WINDOW);
    assert_group_wait(ask_at(store, &mut *a, permit_of("k3", 0), &g(50)), 0, DAY - 10 * WINDOW, slack);
    assert!(matches!(ask_at(store, &mut *a, permit_of("k3", 0), &g(40)), GrantAnswer::Granted(_)), "60 + 40");
}

/// A resource's rpd and a group's rpd still count the grants made before
/// the authority restarted (a new process, or a new connection), and a
/// lease held across it still takes its group's one concurrent slot.
pub fn a_day_window_holds_across_a_restart(store: &dyn Store) {
    let t = tenant("day-restart");
    let started = Instant::now();
    let c = |rpd| Claim {
        groups: claim_grouped("project", Limits { rpd: Some(rpd), ..Limits::default() }, None, 1).groups,
        ..claim(Limits { rpd: Some(2), ..Limits::default() }, 1)
    };
    let seats = claim_grouped("seats", Limits::default(), Some(1), 1);
    let held = {
        let mut a = store.connect(&t);
        assert!(matches!(ask(store, &mut *a, 0, &c(3)), GrantAnswer::Granted(_)));
        assert!(matches!(ask_at(store, &mut *a, permit_of("k2", 0), &c(3)), GrantAnswer::Granted(_)));
        let GrantAnswer::Granted(held) = a.grant(permit_of("k5", 0), TTL, 0, store.now(), Some(&seats), 0).unwrap()
        else {
            panic!("the group's one slot is free")
        };
        held
    };
    if !store.restart(&t) {
        return;
    }
    let mut a = store.connect(&t);
    assert!(matches!(ask(store, &mut *a, 1, &c(3)), GrantAnswer::Granted(_)));
    assert_wait(ask(store, &mut *a, 2, &c(4)), DAY, started.elapsed());
    assert_group_wait(ask_at(store, &mut *a, permit_of("k3", 0), &c(3)), 0, DAY, started.elapsed());
    let wait = store.concurrency_wait(TTL);
    assert_group_wait(ask_at(store, &mut *a, permit_of("k6", 0), &seats), 0, wait, started.elapsed());
    a.revoke(permit_of("k5", 0), held).unwrap();
    assert!(matches!(ask_at(store, &mut *a, permit_of("k6", 0), &seats), GrantAnswer::Granted(_)), "revoked");
}

/// The core's table of cases (`repute_core::usage::cases`), each on a
/// tenant of its own: the store answers what the core's rule does, a wait
/// within what its own clock ran since the case began. Time moves on by
/// aging what the store counted.
pub fn the_core_rules_cases_hold(store: &dyn Store) {
    for (n, case) in CASES.iter().enumerate() {
        let t = tenant(&format!("case-{n}"));
        let mut a = store.connect(&t);
        let started = Instant::now();
        let (mut clock, mut granted) = (0, Vec::new());
        for (i, step) in case.steps.iter().enumerate() {
            let name = case.name;
            match *step {
                Step::Ask { at, cost, expect } => {
                    if at > clock {
                        store.age(&t, at - clock);
                        clock = at;
                    }
                    let answer = ask(store, &mut *a, 0, &claim(case.limits, cost));
                    match (expect, answer) {
                        (Verdict::Admitted, GrantAnswer::Granted(token)) => granted.push((token, cost)),
                        (Verdict::Until(until), GrantAnswer::Limited(Some(wait))) => {
                            let full = until - at;
                            let floor = full.saturating_sub(started.elapsed().as_nanos() as u64);
                            assert!((floor..=full).contains(&wait), "{name}: step {i} waits {wait} ns, not {full}");
                        }
                        (Verdict::Spent, GrantAnswer::Limited(None)) | (Verdict::Oversized, GrantAnswer::Held) => {}
                        (expect, answer) => panic!("{name}: step {i} answered {answer:?}, the rule {expect:?}"),
                    }
                }
                Step::Reconcile { grant, used } => {
                    let (token, cost) = granted[grant];
                    a.reconcile(permit(0), None, token, cost, used).unwrap();
                }
            }
        }
    }
}

/// A `Fencing` behind a lock, so that every connection of a test reaches
/// the tenant's one in-process authority.
struct Shared<F>(Arc<Mutex<F>>);

impl<F: Fencing> Shared<F> {
    fn get(&self) -> std::sync::MutexGuard<'_, F> {
        self.0.lock().unwrap()
    }
}

impl<F: Fencing> Fencing for Shared<F> {
    fn grant(
        &mut self,
        permit: Permit<'_>,
        ttl: u64,
        last: u64,
        now: u64,
        claim: Option<&Claim>,
        view: u64,
    ) -> Result<GrantAnswer, StoreError> {
        self.get().grant(permit, ttl, last, now, claim, view)
    }

    fn reconcile(
        &mut self,
        permit: Permit<'_>,
        context: Option<&str>,
        token: u64,
        reserved: u64,
        used: u64,
    ) -> Result<(), StoreError> {
        self.get().reconcile(permit, context, token, reserved, used)
    }

    fn extend(&mut self, permit: Permit<'_>, token: u64, ttl: u64, now: u64) -> Result<bool, StoreError> {
        self.get().extend(permit, token, ttl, now)
    }

    fn window(&mut self, resources: &[(&str, &str)], now: u64) -> Result<Vec<Window>, StoreError> {
        self.get().window(resources, now)
    }

    fn revoke(&mut self, permit: Permit<'_>, token: u64) -> Result<(), StoreError> {
        self.get().revoke(permit, token)
    }

    fn live(&mut self, kind: &str, value: &str, first: u32, permits: u32, now: u64) -> Result<u32, StoreError> {
        self.get().live(kind, value, first, permits, now)
    }
}

/// The in-process authorities judge on the `now` they are given: aging is
/// moving that clock on.
pub struct InProcess<F> {
    clock: ManualClock,
    tenants: Mutex<HashMap<String, Arc<Mutex<F>>>>,
    open: fn(&str) -> F,
    kept: fn(&str) -> Option<usize>,
    /// Whether an authority opened anew remembers what the last one counted.
    durable: bool,
}

impl<F: Fencing + Send + 'static> Store for InProcess<F> {
    fn connect(&self, tenant: &str) -> Box<dyn Fencing> {
        let mut tenants = self.tenants.lock().unwrap();
        let f = tenants.entry(tenant.to_owned()).or_insert_with(|| Arc::new(Mutex::new((self.open)(tenant))));
        Box::new(Shared(f.clone()))
    }

    fn now(&self) -> u64 {
        use repute_host::Clock;
        self.clock.now()
    }

    fn age(&self, _: &str, ns: u64) {
        self.clock.advance(ns);
    }

    fn kept(&self, tenant: &str) -> Option<usize> {
        (self.kept)(tenant)
    }

    fn restart(&self, tenant: &str) -> bool {
        self.tenants.lock().unwrap().remove(tenant);
        self.durable
    }
}

fn memory() -> InProcess<MemoryFencing> {
    InProcess {
        clock: ManualClock::new(SECOND),
        tenants: Mutex::default(),
        open: |_| MemoryFencing::default(),
        kept: |_| None,
        durable: false,
    }
}

/// Every tenant of the SQLite suite lives in one file of the process.
fn sqlite_file() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("repute-host-{}-usage", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("usage.db")
}

fn sqlite() -> InProcess<repute_host::providers::SqliteFencing> {
    InProcess {
        clock: ManualClock::new(SECOND),
        tenants: Mutex::default(),
        open: |tenant| SqliteStorage::open(sqlite_file(), tenant).unwrap().fencing(),
        kept: |tenant| {
            let conn = rusqlite::Connection::open(sqlite_file()).unwrap();
            let n: i64 =
                conn.query_row("SELECT count(*) FROM usage_window WHERE tenant = ?1", [tenant], |r| r.get(0)).unwrap();
            Some(n as usize)
        },
        durable: true,
    }
}

mod memory {
    use super::*;
    usage_limit_tests!(store: memory());
}

mod sqlite {
    use super::*;
    usage_limit_tests!(store: sqlite());
}

// ---- through the pool ----

/// A fresh database path under the system temp dir, removed on drop.
struct TempDb(PathBuf);

impl TempDb {
    fn new(name: &str) -> TempDb {
        let dir = std::env::temp_dir().join(format!("repute-host-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDb(dir.join("pool.db"))
    }
}

impl Drop for TempDb {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(self.0.parent().unwrap());
    }
}

fn limited(limits: Limits) -> Registration {
    Registration { limits, ..Registration::new(1) }
}

fn invalid(field: &str, rule: &str) -> Error {
    Error::InvalidInput { field: field.into(), rule: rule.into() }
}

fn refusal(e: Error) -> repute_host::Refusal {
    match e {
        Error::NoResourceAvailable(r) => r,
        other => panic!("expected no resource available, got {other:?}"),
    }
}

/// The grant an embedded SQLite pool made before it stopped (no
/// checkpoint: as after `kill -9`) still counts after it opens again: the
/// table refuses the next grant until rpm 2's spacing of 30 s has passed.
#[test]
fn rpm_on_an_embedded_sqlite_pool_survives_a_restart() {
    let db = TempDb::new("rpm-restart");
    let open = || {
        let providers = Providers::sqlite(&db.0, "shop", Arc::new(SystemClock::new())).unwrap();
        Pool::open(TenantConfig { durable: true, ..TenantConfig::default() }, providers).unwrap()
    };
    let started = Instant::now();
    {
        let mut p = open();
        p.register_with("key", "k1", &limited(Limits { rpm: Some(2), ..Limits::default() })).unwrap();
        let lease = p.acquire("chat").unwrap();
        p.release(lease.id, lease.token).unwrap();
        p.close();
    }
    let mut p = open();
    assert_eq!(p.resources().unwrap()[0].uses, 0, "the new pool counted none of them itself");
    let r = refusal(p.acquire("chat").unwrap_err());
    assert_eq!((r.registered, r.limited), (1, 1));
    let wait = r.retry_after.expect("the table says when");
    let elapsed = started.elapsed().as_nanos() as u64;
    let spacing = WINDOW / 2;
    assert!(wait <= spacing && wait >= spacing - elapsed, "retry after {wait} ns, {elapsed} ns after the grant");
}

/// A quota group's day on an embedded SQLite pool: the grants of its two
/// members before a restart (no checkpoint, as after `kill -9`) still
/// count after it, and the table refuses the third with the day's wait,
/// whichever member is asked.
#[test]
fn a_groups_day_on_an_embedded_sqlite_pool_survives_a_restart() {
    let db = TempDb::new("group-restart");
    let open = || {
        let providers = Providers::sqlite(&db.0, "shop", Arc::new(SystemClock::new())).unwrap();
        Pool::open(TenantConfig { durable: true, ..TenantConfig::default() }, providers).unwrap()
    };
    let project = GroupName::new("project").unwrap();
    let started = Instant::now();
    {
        let mut p = open();
        p.set_group("project", &GroupLimits { rpd: Some(2), ..GroupLimits::default() }).unwrap();
        for key in ["k1", "k2"] {
            let member = Registration { groups: vec![project.clone()], ..Registration::new(1) };
            p.register_with("key", key, &member).unwrap();
        }
        for _ in 0..2 {
            let lease = p.acquire("chat").unwrap();
            p.release(lease.id, lease.token).unwrap();
        }
        p.close();
    }
    let mut p = open();
    let r = refusal(p.acquire("chat").unwrap_err());
    assert_eq!((r.registered, r.limited), (2, 2), "{r:?}");
    let wait = r.retry_after.expect("the table says when");
    let elapsed = started.elapsed().as_nanos() as u64;
    assert!(wait <= DAY && wait >= DAY - elapsed, "retry after {wait} ns, {elapsed} ns after the grants");
}

/// Through the component: a grant reserves its cost, a reconcile gives back
/// what was not used, spent `max_uses` retire the resource with an event
/// and `max_age` on the clock; the views show limits, uses and why a
/// resource retired.
#[test]
fn a_pool_counts_costs_reconciles_and_retires() {
    let clock = ManualClock::new(SECOND);
    let providers = Providers::memory_with_clock(Arc::new(clock.clone()));
    let mut p = Pool::open(TenantConfig::default(), providers).unwrap();
    let limits = Limits { tpm: Some(100), max_uses: Some(3), ..Limits::default() };
    p.register_with("key", "k1", &Registration { limits, ..Registration::new(2) }).unwrap();
    let dear = Selector { cost: Some(80), ..Selector::default() };
    let lease = p.acquire_with("chat", &dear).unwrap();
    let r = refusal(p.acquire_with("chat", &Selector { cost: Some(30), ..Selector::default() }).unwrap_err());
    assert_eq!((r.limited, r.retry_after), (1, Some(WINDOW)));
    p.reconcile(lease.id, lease.token, 10).unwrap();
    let second = p.acquire_with("chat", &Selector { cost: Some(30), ..Selector::default() }).unwrap();
    p.release(second.id, second.token).unwrap();
    p.release(lease.id, lease.token).unwrap();
    assert_eq!(p.reconcile(lease.id, lease.token, 5), Err(Error::UnknownLease), "only a live lease reconciles");
    let third = p.acquire("chat").unwrap();
    p.release(third.id, third.token).unwrap();
    let view = &p.resources().unwrap()[0];
    assert_eq!((view.limits, view.uses, view.retired), (limits, 3, Some(RetireReason::MaxUses)));
    let retired: Vec<_> =
        p.drain_events().unwrap().into_iter().filter(|e| matches!(e.kind, EventKind::Retired { .. })).collect();
    assert_eq!(retired.len(), 1);
    assert!(
        matches!(&retired[0].kind, EventKind::Retired { resource, reason: RetireReason::MaxUses } if resource.value() == "k1")
    );
    let r = refusal(p.acquire("chat").unwrap_err());
    assert_eq!((r.limited, r.retry_after), (1, None), "retired: no wait ends it");
    // max_age retires on the pool's clock, with no grant to count.
    let aging = Limits { max_age: Some(10 * SECOND), ..Limits::default() };
    p.register_with("key", "k3", &limited(aging)).unwrap();
    clock.advance(10 * SECOND);
    let view = p.resources().unwrap().into_iter().find(|v| v.resource.value() == "k3").unwrap();
    assert_eq!((view.uses, view.retired), (0, Some(RetireReason::MaxAge)));
    assert_eq!(
        p.register_with("key", "k2", &limited(Limits { rpm: Some(0), ..Limits::default() })),
        Err(invalid("limits.rpm", "must be in 1..=100000"))
    );
    assert_eq!(
        p.acquire_with("chat", &Selector { cost: Some(0), ..Selector::default() }),
        Err(invalid("cost", "must be > 0"))
    );
}

/// A pool that is its own authority (in memory) shows its own window in
/// its views: the grants and tokens (as reconciled) of the last minute of a
/// resource with an rpm or tpm, nothing for one without, and nothing once
/// the minute passed.
#[test]
fn a_pools_views_show_its_window() {
    let clock = ManualClock::new(SECOND);
    let mut p = Pool::open(TenantConfig::default(), Providers::memory_with_clock(Arc::new(clock.clone()))).unwrap();
    let limits = Limits { rpm: Some(1000), tpm: Some(100), ..Limits::default() };
    p.register_with("key", "k1", &Registration { limits, ..Registration::new(3) }).unwrap();
    p.register_with("key", "k2", &limited(Limits { max_uses: Some(5), ..Limits::default() })).unwrap();
    let on = |value: &str, cost| Selector { prefer: Some(value.into()), cost: Some(cost), ..Selector::default() };
    let first = p.acquire_with("chat", &on("k1", 30)).unwrap();
    clock.advance(SECOND);
    p.acquire_with("chat", &on("k1", 40)).unwrap();
    p.reconcile(first.id, first.token, 5).unwrap();
    p.acquire_with("chat", &on("k2", 1)).unwrap();
    let windows = |p: &mut Pool| p.resources().unwrap().iter().map(|v| v.window).collect::<Vec<_>>();
    assert_eq!(windows(&mut p), [Window { grants: 2, tokens: 45 }, Window::default()]);
    clock.advance(WINDOW);
    assert_eq!(windows(&mut p), [Window::default(), Window::default()], "the minute passed");
}

/// The holder's lease reports its usage with its outcome: the tokens are
/// reconciled first, so the next acquire finds them free; after the
/// release there is no lease to reconcile, and nothing is reported.
#[test]
fn the_holder_reconciles_and_reports_usage() {
    let clock = ManualClock::new(SECOND);
    let names = |_| "option";
    let holder = Holder::open(OpenOptions::default(), Some(Arc::new(clock.clone())), names).unwrap();
    let limits = Limits { tpm: Some(100), ..Limits::default() };
    holder.with(|p| p.register_with("key", "k1", &Registration { limits, ..Registration::new(2) })).unwrap();
    let cost = |n| Selector { cost: Some(n), ..Selector::default() };
    let lease = holder.try_acquire("chat", &cost(90)).unwrap().expect("90 of 100 fit");
    assert!(holder.try_acquire("chat", &cost(20)).unwrap().is_none(), "90 + 20 do not");
    lease.report(&Outcome::Success { latency_ms: 120.0 }, Some(15)).unwrap();
    let second = holder.try_acquire("chat", &cost(20)).unwrap().expect("15 + 20 fit");
    second.reconcile(0).unwrap();
    assert_eq!(lease.release().unwrap(), repute_host::holder::Released::Held);
    let observations = |h: &Holder| h.with(|p| p.cells("key", "k1")).unwrap()[0].observations;
    assert_eq!(observations(&holder), 1);
    assert_eq!(lease.report(&Outcome::Success { latency_ms: 1.0 }, Some(1)), Err(Error::UnknownLease));
    assert_eq!(observations(&holder), 1, "a refused reconcile reports nothing");
    lease.report(&Outcome::Success { latency_ms: 1.0 }, None).unwrap();
    assert_eq!(observations(&holder), 2);
}
