//! One log, one state (I8) under change, load and faults: three `repute
//! serve --mode shared` processes on one store (PostgreSQL, Redis), or three
//! of `--mode partitioned` splitting the tenant in three (PostgreSQL), take
//! random registrations, regroups, permit changes, unregisters, blocks and
//! group limits at random processes while workers acquire and release at
//! random processes, and one process is paused past the lease TTL, one
//! killed and replaced, the store restarted. At quiescence every process (in partitioned mode,
//! every partition), and a fresh one that folds the log from its start,
//! must show the same registrations and groups.
//!
//! The checker reads only the HTTP views and compares what every process
//! derives from the log alone: each resource's permits, labels, limits,
//! groups and whether it is blocked, and each group's limits; and what every
//! process reads from the store: each group's day usage and live leases,
//! where its limits keep them. It shares no code with the pool (the digest
//! is computed here, from JSON).
//!
//! An independent window check then replays what the clients saw: every
//! key has a fixed `rpm` (which also spaces its grants) and group `g3` a
//! fixed `rpm` and `concurrency` while keys join and leave it. A grant's
//! true instant lies between its request and its answer, so limits were
//! certainly exceeded only if more grants than a limit fit in one minute
//! even at their latest, two grants of a key fell closer than its spacing
//! even at their farthest, or more leases than the concurrency were held
//! at one instant even counted from their answers to their releases; a grant counts in `g3` only when the
//! key's last acknowledged change before the request put it there and no
//! change of the key was in flight meanwhile.
//!
//! `REPUTE_CONVERGENCE_SECONDS` sets how long the mix runs (default 16, the
//! faults at fixed points in it); a longer run tries more interleavings.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use repute_tests::http::Cluster;
use repute_tests::proxy::Proxy;
use repute_tests::server::Server;
use repute_tests::services::{url_via, Service};
use repute_tests::unique;
use serde_json::{json, Value};

/// The stores are shared with every other suite: one scenario at a time.
static SERIAL: Mutex<()> = Mutex::new(());

const SERVERS: usize = 3;
const KEYS: usize = 6;
const WORKERS: usize = 4;
const LEASE_TTL: &str = "2";
/// Every key's `rpm`, as every registration gives it: at most that many
/// grants a minute, one every `60 s / rpm` (`Limits::paced`).
const KEY_RPM: usize = 600;
/// Group `g3`'s limits, set once before the mix.
const G3_RPM: usize = 240;
const G3_CONCURRENCY: usize = 2;
const MINUTE: Duration = Duration::from_secs(60);

fn run_seconds() -> u64 {
    std::env::var("REPUTE_CONVERGENCE_SECONDS").map_or(16, |v| v.parse().expect("REPUTE_CONVERGENCE_SECONDS: seconds"))
}

/// splitmix64, seeded per thread: enough randomness to mix operations.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)) % n
    }
}

/// What the mutator and the workers did, as the servers answered.
#[derive(Default)]
struct Counts {
    accepted: AtomicU64,
    refused: AtomicU64,
    unanswered: AtomicU64,
    grants: AtomicU64,
}

/// A change of a key's registration as the mutator saw it: sent, answered
/// (`None`: no answer), and whether it was applied (`None`: not known — no
/// answer, or a server error), and what it left: in `g3` or not.
struct Change {
    key: String,
    sent: Instant,
    answered: Option<Instant>,
    applied: Option<bool>,
    in_g3: bool,
}

/// A grant as a worker saw it: sent, answered, and until when it was
/// certainly held (the release's request).
struct Grant {
    key: String,
    sent: Instant,
    answered: Instant,
    released: Instant,
}

/// What the clients saw, for the window check.
#[derive(Default)]
struct Seen {
    changes: Mutex<Vec<Change>>,
    grants: Mutex<Vec<Grant>>,
}

impl Counts {
    fn count(&self, status: Option<u16>) {
        let counter = match status {
            Some(s) if s < 300 => &self.accepted,
            Some(_) => &self.refused,
            None => &self.unanswered,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// One request; the status and body, or `None` when no answer came. A
/// "not the owner" answer (421, partitioned mode) is followed to the owner
/// it names, as a client of a partitioned cluster does.
fn send(agent: &ureq::Agent, method: &str, url: &str, tenant: &str, body: Option<Value>) -> Option<(u16, Value)> {
    let mut url = url.to_owned();
    for _ in 0..SERVERS {
        let req = agent.request(method, &url).set("Repute-Tenant", tenant);
        let res = match body.clone() {
            Some(b) => req.send_json(b),
            None => req.call(),
        };
        let res = match res {
            Ok(r) => r,
            Err(ureq::Error::Status(_, r)) => r,
            Err(_) => return None,
        };
        let status = res.status();
        let answer = res.into_json().unwrap_or(Value::Null);
        match answer["owner"].as_str().filter(|_| status == 421) {
            Some(owner) => url = format!("{}{}", owner.trim_end_matches('/'), path_of(&url)),
            None => return Some((status, answer)),
        }
    }
    None
}

/// The path and query of an `http://host:port/...` URL.
fn path_of(url: &str) -> &str {
    let after = url.strip_prefix("http://").expect("an http URL");
    &after[after.find('/').unwrap_or(after.len())..]
}

fn agent() -> ureq::Agent {
    ureq::AgentBuilder::new().timeout(Duration::from_secs(1)).build()
}

/// One random change at a random process; a registration's or an
/// unregistration's answer is kept in `seen`.
fn mutate(rng: &mut Rng, cluster: &Cluster, tenant: &str, agent: &ureq::Agent, seen: &Seen) -> Option<u16> {
    let server = cluster.get(rng.below(SERVERS as u64) as usize);
    let key = format!("k{}", rng.below(KEYS as u64));
    let mut in_g3 = None;
    let (method, path, body) = match rng.below(10) {
        0..=4 => {
            let mut groups: Vec<&str> = match rng.below(4) {
                0 => vec![],
                1 => vec!["g1"],
                2 => vec!["g2"],
                _ => vec!["g1", "g2"],
            };
            if rng.below(2) == 0 {
                groups.push("g3");
            }
            in_g3 = Some(groups.contains(&"g3"));
            let tier = ["a", "b"][rng.below(2) as usize];
            let body = json!({"kind": "key", "value": key, "permits": 1 + rng.below(2), "groups": groups,
                "labels": {"tier": tier}, "limits": {"rpm": KEY_RPM}});
            ("POST", "/v1/resources".to_owned(), Some(body))
        }
        5 => {
            in_g3 = Some(false);
            ("DELETE", format!("/v1/resources/key/{key}"), None)
        }
        // Blocks until unblocked: a timed block ends on the clock of each
        // process that folds it, so a process opening later holds it longer.
        6 => ("PUT", format!("/v1/resources/key/{key}/block"), Some(json!({"reason": "mix"}))),
        7 => ("DELETE", format!("/v1/resources/key/{key}/block"), None),
        _ => {
            let group = ["g1", "g2"][rng.below(2) as usize];
            let rpm = [json!(null), json!(50), json!(500)][rng.below(3) as usize].clone();
            let limits = json!({"rpm": rpm, "rpd": 100_000, "concurrency": 4});
            ("PUT", format!("/v1/groups/{group}/limits"), Some(limits))
        }
    };
    let sent = Instant::now();
    let status = send(agent, method, &format!("{server}{path}"), tenant, body).map(|(status, _)| status);
    if let Some(in_g3) = in_g3 {
        let answered = status.map(|_| Instant::now());
        let applied = match status {
            Some(s) if s < 300 => Some(true),
            Some(s) if s < 500 => Some(false),
            _ => None,
        };
        seen.changes.lock().unwrap().push(Change { key, sent, answered, applied, in_g3 });
    }
    status
}

/// Acquires at a random process and releases there a moment later.
fn work(rng: &mut Rng, cluster: &Cluster, tenant: &str, agent: &ureq::Agent, counts: &Counts, seen: &Seen) {
    let server = cluster.get(rng.below(SERVERS as u64) as usize);
    let context = format!("c{}", rng.below(CONTEXTS));
    let sent = Instant::now();
    let Some((201, lease)) =
        send(agent, "POST", &format!("{server}/v1/leases"), tenant, Some(json!({"context": context})))
    else {
        std::thread::sleep(Duration::from_millis(5));
        return;
    };
    let answered = Instant::now();
    counts.grants.fetch_add(1, Ordering::Relaxed);
    std::thread::sleep(Duration::from_millis(rng.below(30)));
    let path = format!("{server}/v1/leases/{}?token={}", lease["id"], lease["token"]);
    let released = Instant::now();
    let _ = send(agent, "DELETE", &path, tenant, None);
    let key = lease["value"].as_str().expect("a lease names its resource").to_owned();
    seen.grants.lock().unwrap().push(Grant { key, sent, answered, released });
}

/// Whether `grant` was certainly made while its key was in `g3`: the key's
/// last change sent before the grant's request that may have applied was
/// acknowledged as applied, put the key in `g3`, and no change of the key
/// that may have applied was in flight while the grant was.
fn certainly_in_g3(grant: &Grant, changes: &[Change]) -> bool {
    let mine = changes.iter().filter(|c| c.key == grant.key && c.applied != Some(false));
    let in_flight = |c: &&Change| c.sent < grant.answered && c.answered.is_none_or(|a| a > grant.sent);
    if mine.clone().any(|c| in_flight(&c)) {
        return false;
    }
    let last = mine.filter(|c| c.sent < grant.sent).max_by_key(|c| c.sent);
    last.is_some_and(|c| c.applied == Some(true) && c.in_g3)
}

/// The most grants that certainly fell in one minute: sorted by request,
/// those from each one whose answers came less than a minute after it.
fn most_in_a_minute(grants: &[&Grant]) -> usize {
    let mut by_sent: Vec<&&Grant> = grants.iter().collect();
    by_sent.sort_by_key(|g| g.sent);
    (0..by_sent.len())
        .map(|i| by_sent[i..].iter().filter(|g| g.answered < by_sent[i].sent + MINUTE).count())
        .max()
        .unwrap_or(0)
}

/// Two grants certainly made less than `spacing` apart, if any: both were
/// requested and answered within a span shorter than it.
fn closer_than(grants: &[&Grant], spacing: Duration) -> Option<Duration> {
    let mut by_sent: Vec<&&Grant> = grants.iter().collect();
    by_sent.sort_by_key(|g| g.sent);
    let spans = (0..by_sent.len()).flat_map(|i| {
        let first = by_sent[i];
        by_sent[i + 1..]
            .iter()
            .take_while(move |g| g.sent < first.sent + spacing)
            .map(move |g| g.answered.max(first.answered) - first.sent)
    });
    spans.filter(|&span| span < spacing).min()
}

/// The most leases certainly held at one instant, each from its answer to
/// its release's request.
fn most_held_at_once(grants: &[&Grant]) -> usize {
    let mut edges: Vec<(Instant, i32)> = grants.iter().flat_map(|g| [(g.answered, 1), (g.released, -1)]).collect();
    // At one instant a release ends before a grant starts.
    edges.sort();
    let (mut held, mut most) = (0i32, 0i32);
    for (_, step) in edges {
        held += step;
        most = most.max(held);
    }
    most as usize
}

/// The window check: over-admissions of every key's `rpm`, and of `g3`'s
/// `rpm` and `concurrency` among the grants certainly in it. Returns the
/// grants it counted in `g3` and the over-admissions found.
fn window_check(seen: &Seen) -> (usize, Vec<String>) {
    let (changes, grants) = (seen.changes.lock().unwrap(), seen.grants.lock().unwrap());
    let mut over = Vec::new();
    for key in (0..KEYS).map(|k| format!("k{k}")) {
        let of_key: Vec<&Grant> = grants.iter().filter(|g| g.key == key).collect();
        let most = most_in_a_minute(&of_key);
        if most > KEY_RPM {
            over.push(format!("{key}: {most} grants in a minute, rpm {KEY_RPM}"));
        }
        if let Some(span) = closer_than(&of_key, MINUTE / KEY_RPM as u32) {
            over.push(format!("{key}: two grants within {span:?}, rpm {KEY_RPM}"));
        }
    }
    let in_g3: Vec<&Grant> = grants.iter().filter(|g| certainly_in_g3(g, &changes)).collect();
    let most = most_in_a_minute(&in_g3);
    if most > G3_RPM {
        over.push(format!("g3: {most} grants in a minute, rpm {G3_RPM}"));
    }
    let held = most_held_at_once(&in_g3);
    if held > G3_CONCURRENCY {
        over.push(format!("g3: {held} leases at once, concurrency {G3_CONCURRENCY}"));
    }
    (in_g3.len(), over)
}

/// What a process derives from the log alone, as its views show it, in a
/// form to compare: resources by id, groups by name. `query` picks the
/// pool that answers (`?context=C`: in partitioned mode, C's partition).
fn digest(server: &str, tenant: &str, query: &str) -> BTreeMap<String, Value> {
    let agent = agent();
    let read = |path: &str| {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match send(&agent, "GET", &format!("{server}{path}{query}"), tenant, None) {
                Some((200, body)) => return body,
                other => assert!(Instant::now() < deadline, "{server}{path}: {other:?}"),
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    let mut out = BTreeMap::new();
    for r in read("/v1/resources").as_array().expect("a list of resources") {
        let id = format!(
            "resource {}/{}",
            r["resource"]["kind"].as_str().unwrap(),
            r["resource"]["value"].as_str().unwrap()
        );
        let kept = json!({"permits": r["permits"], "labels": r["labels"], "limits": r["limits"], "groups": r["groups"],
            "blocked": !r["block"].is_null()});
        out.insert(id, kept);
    }
    for g in read("/v1/groups").as_array().expect("a list of groups") {
        let name = g["name"].as_str().unwrap();
        out.insert(format!("group {name}"), g["limits"].clone());
        // The store's counts, which every process reads alike: the day
        // while the group has an `rpd` (the minute would move between
        // reads), its live leases while it has a `concurrency`.
        if !g["limits"]["rpd"].is_null() {
            out.insert(format!("group {name} day_usage"), g["day_usage"].clone());
        }
        if !g["limits"]["concurrency"].is_null() {
            out.insert(format!("group {name} leased"), g["leased"].clone());
        }
    }
    out
}

/// How the processes share the tenant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Every process serves the whole tenant.
    Shared,
    /// The tenant split by context into `SERVERS` partitions, each with an
    /// owner (PostgreSQL).
    Partitioned,
}

/// Contexts of the workers' acquires, `c0` to `c5`: in partitions 1, 2, 2,
/// 0, 2 and 0 of three (FNV-1a), so every partition has some.
const CONTEXTS: u64 = 6;

fn serve(store: &str, proxy: &Proxy, mode: Mode) -> Server {
    let store = url_via(store, proxy.addr());
    let mut args: Vec<String> =
        ["--no-auth", "--store", &store, "--sync-every", "0.1", "--lease-ttl", LEASE_TTL].map(str::to_owned).into();
    let partitions = SERVERS.to_string();
    let mode = match mode {
        Mode::Shared => vec!["--mode", "shared"],
        Mode::Partitioned => vec!["--mode", "partitioned", "--partitions", &partitions, "--owner-ttl", "2"],
    };
    args.extend(mode.into_iter().map(str::to_owned));
    Server::start(&args)
}

fn scenario(service: Service, mode: Mode) {
    let _one_at_a_time = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let store = service.url();
    let tenant = unique(&format!("converge_{service}"));
    let proxies: Vec<Proxy> = (0..SERVERS).map(|_| Proxy::start(service.addr())).collect();
    let mut servers: Vec<Server> = proxies.iter().map(|p| serve(&store, p, mode)).collect();
    let cluster = Cluster::new(servers.iter().map(|s| s.base().to_owned()).collect());
    let g3 = json!({"rpm": G3_RPM, "concurrency": G3_CONCURRENCY});
    let set = send(&agent(), "PUT", &format!("{}/v1/groups/g3/limits", cluster.get(0)), &tenant, Some(g3));
    assert!(matches!(set, Some((200..=299, _))), "g3's limits: {set:?}");

    let stop = Arc::new(AtomicBool::new(false));
    let (changes, load) = (Arc::new(Counts::default()), Arc::new(Counts::default()));
    let seen = Arc::new(Seen::default());
    let mut threads = Vec::new();
    for seed in 0..=WORKERS as u64 {
        let (stop, cluster, tenant) = (stop.clone(), cluster.clone(), tenant.clone());
        let (changes, load, seen) = (changes.clone(), load.clone(), seen.clone());
        threads.push(std::thread::spawn(move || {
            let (mut rng, agent) = (Rng(seed * 7919 + 17), agent());
            while !stop.load(Ordering::Relaxed) {
                if seed == 0 {
                    changes.count(mutate(&mut rng, &cluster, &tenant, &agent, &seen));
                    std::thread::sleep(Duration::from_millis(rng.below(20)));
                } else {
                    work(&mut rng, &cluster, &tenant, &agent, &load, &seen);
                }
            }
        }));
    }

    let seconds = run_seconds();
    let started = Instant::now();
    let at = |fraction: f64| {
        let due = started + Duration::from_secs_f64(seconds as f64 * fraction);
        std::thread::sleep(due.saturating_duration_since(Instant::now()));
    };
    let mut faults = Vec::new();
    at(0.2);
    servers[1].pause();
    std::thread::sleep(Duration::from_millis(2500));
    servers[1].resume();
    faults.push("a server paused 2.5 s (lease TTL 2 s)");
    at(0.45);
    let replacement = serve(&store, &proxies[2], mode);
    cluster.replace(2, replacement.base().to_owned());
    std::mem::replace(&mut servers[2], replacement).kill();
    faults.push("a server killed and replaced");
    at(0.7);
    service.restart();
    faults.push("the store restarted");
    at(1.0);
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().expect("a client thread");
    }

    // Quiescence: every process synced (every 0.1 s). A fresh process of
    // shared mode folds the whole log (no process of partitioned mode
    // holds the whole tenant); every process, or every partition, must
    // have folded it to the same state.
    std::thread::sleep(Duration::from_secs(1));
    let fresh = serve(&store, &proxies[0], Mode::Shared);
    let expected = digest(fresh.base(), &tenant, "");
    let queries: Vec<(String, String)> = match mode {
        Mode::Shared => servers.iter().map(|s| (s.base().to_owned(), String::new())).collect(),
        Mode::Partitioned => (0..CONTEXTS).map(|c| (cluster.get(c as usize), format!("?context=c{c}"))).collect(),
    };
    let mut compared = 0;
    for (server, query) in &queries {
        let got = digest(server, &tenant, query);
        assert_eq!(got, expected, "{server}{query} folded the log to another state than a fresh process");
        compared += 1;
    }
    let (resources, groups) = (
        expected.keys().filter(|k| k.starts_with("resource")).count(),
        expected.keys().filter(|k| k.starts_with("group")).count(),
    );
    let (in_g3, over) = window_check(&seen);
    println!(
        "convergence on {service} ({mode:?}): {} changes accepted, {} refused, {} unanswered; {} grants; faults: {}; \
         {compared} processes' (or contexts' partitions') states equal to a fresh process's ({resources} resources, {groups} groups); \
         window check: {} over-admissions ({KEYS} keys at rpm {KEY_RPM}; {in_g3} grants certainly in g3 at \
         rpm {G3_RPM}, concurrency {G3_CONCURRENCY})",
        changes.accepted.load(Ordering::Relaxed),
        changes.refused.load(Ordering::Relaxed),
        changes.unanswered.load(Ordering::Relaxed),
        load.grants.load(Ordering::Relaxed),
        faults.join(", "),
        over.len(),
    );
    assert!(over.is_empty(), "over-admissions: {over:?}");
    assert!(in_g3 > 0, "the check counted grants in g3");
    assert!(changes.accepted.load(Ordering::Relaxed) > 50, "the mix changed the pool");
    assert!(changes.refused.load(Ordering::Relaxed) > 0, "some changes met a leased key");
    assert!(load.grants.load(Ordering::Relaxed) > 100, "the load ran");
}

#[test]
fn postgres_shared_processes_fold_every_change_to_one_state() {
    scenario(Service::Postgres, Mode::Shared);
}

#[test]
fn postgres_partitions_fold_every_change_to_one_state() {
    scenario(Service::Postgres, Mode::Partitioned);
}

#[test]
fn redis_shared_processes_fold_every_change_to_one_state() {
    scenario(Service::Redis, Mode::Shared);
}
