//! Worker threads that use a cluster the way a real service would, and
//! record everything the checkers need on the harness's one monotonic clock
//! (`Instant`, shared by every thread of this process), and the grants'
//! times on the machine's realtime clock too, the one the stores date
//! grants by (`limits`).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use serde_json::{json, Value};

use crate::downstream::{Downstream, Fenced};
use crate::http::{Client, Cluster, Unanswered};

/// Share of a lease's TTL a holder keeps in reserve: it stops using the
/// lease at `sent + ttl × (1 − margin)` (I7), before the authority, whose
/// TTL started later than `sent`, can expire it.
const DEADLINE_MARGIN: f64 = 0.2;

/// One lease as its holder saw it.
#[derive(Debug, Clone)]
pub struct Grant {
    pub worker: usize,
    /// The server that granted it.
    pub server: String,
    /// `kind/value`.
    pub resource: String,
    pub permit: u32,
    pub token: u64,
    /// When the acquire request was first sent.
    pub sent: Instant,
    /// When the grant arrived: the holder uses the resource from here...
    pub granted: Instant,
    /// ...until it sent the release (the authority frees the permit after
    /// that), or gave up on the lease.
    pub released: Instant,
    /// When the release was acknowledged (204), if it was: from then on the
    /// permit must never be held by this lease again.
    pub release_acknowledged: Option<Instant>,
    /// The TTL the lease was granted with.
    pub ttl: Duration,
    /// `sent` and `granted` read on the realtime clock: the store dated the
    /// grant between the two (see `limits`).
    pub sent_at: SystemTime,
    pub granted_at: SystemTime,
    /// Tokens the acquire reserved against the resource's `tpm` (1 when it
    /// named no cost, as the authority counts it).
    pub cost: u64,
    /// Tokens the use took, never more than `cost`: reconciled before the
    /// release when the acquire named a cost, else `cost`.
    pub used: u64,
}

impl Grant {
    /// The holder's local deadline: past it the lease counts as lost.
    pub fn deadline(&self) -> Instant {
        self.sent + self.ttl.mul_f64(1.0 - DEADLINE_MARGIN)
    }

    /// End of the interval in which the holder may have used the resource.
    pub fn held_until(&self) -> Instant {
        self.released.min(self.deadline())
    }
}

/// A fault a test injected, for failover times.
#[derive(Debug, Clone)]
pub struct Fault {
    pub name: String,
    pub at: Instant,
}

/// Everything a run observed.
#[derive(Debug, Default)]
pub struct Records {
    pub grants: Vec<Grant>,
    pub faults: Vec<Fault>,
    /// When the workers started and stopped.
    pub span: Option<(Instant, Instant)>,
    /// The same two moments on the realtime clock.
    pub wall_span: Option<(SystemTime, SystemTime)>,
    pub counts: Counts,
}

/// What the workers counted besides grants.
#[derive(Debug, Default, Clone, Copy)]
pub struct Counts {
    /// Downstream writes refused because a higher token had been seen.
    pub downstream_refused: u64,
    /// Holders that reached their deadline before they finished (I7).
    pub leases_lost: u64,
    /// Reports answered 2xx.
    pub reports_acknowledged: u64,
    /// Reports sent without a 2xx: may or may not have been applied.
    pub reports_unacknowledged: u64,
    /// Releases not answered 204 (the lease then ends by expiry).
    pub releases_failed: u64,
    /// Acquires answered 409: no resource could be granted then (under
    /// usage limits, mostly every one at its limit).
    pub acquires_refused: u64,
    /// Usage reports (reconciles) not answered 204: the authority may still
    /// count the reservation.
    pub reconciles_failed: u64,
}

impl Counts {
    /// Adds `o`'s counts: a run's workers, or two workloads judged together.
    pub fn add(&mut self, o: &Counts) {
        self.downstream_refused += o.downstream_refused;
        self.leases_lost += o.leases_lost;
        self.reports_acknowledged += o.reports_acknowledged;
        self.reports_unacknowledged += o.reports_unacknowledged;
        self.releases_failed += o.releases_failed;
        self.acquires_refused += o.acquires_refused;
        self.reconciles_failed += o.reconciles_failed;
    }
}

/// What a workload does.
#[derive(Debug, Clone)]
pub struct Config {
    pub tenant: String,
    pub workers: usize,
    /// The workers stop once this many grants were made.
    pub grants: usize,
    /// Contexts the workers acquire for (`site-0`, `site-1`, ...).
    pub contexts: usize,
    /// A holder keeps a lease for a random time in this range.
    pub hold: (Duration, Duration),
    /// One lease in `.0` is held for `.1` instead: holders still at work
    /// when a fault strikes, long after the authority last saved its state.
    pub long_hold: Option<(u64, Duration)>,
    /// A request without an answer by then goes to another server.
    pub timeout: Duration,
    pub downstream_url: String,
    pub downstream_table: String,
    /// Give up when no grant was made for this long.
    pub stall: Duration,
    /// Each acquire reserves a cost drawn from this range (inclusive); the
    /// use then takes between half of it and all of it, and the worker
    /// reconciles that before it releases. `None`: acquires name no cost.
    pub cost: Option<(u64, u64)>,
}

impl Config {
    /// The workload the fault scenarios run: 8 workers over 4 contexts,
    /// short holds, a client timeout well under the leases' TTL; `grants`
    /// in all (`usize::MAX`: until stopped), each use fenced in `table` of
    /// the database at `pg`.
    pub fn faults(tenant: &str, grants: usize, pg: &str, table: String) -> Config {
        Config {
            tenant: tenant.to_owned(),
            workers: 8,
            grants,
            contexts: 4,
            hold: (Duration::ZERO, Duration::from_millis(4)),
            long_hold: None,
            timeout: Duration::from_millis(750),
            downstream_url: pg.to_owned(),
            downstream_table: table,
            stall: Duration::from_secs(30),
            cost: None,
        }
    }
}

/// Registers `count` resources `proxy/r{i}`, with 1 or 2 permits.
pub fn register(cluster: &Cluster, tenant: &str, count: usize) {
    register_all(
        cluster,
        tenant,
        (0..count).map(|i| json!({"kind": "proxy", "value": format!("r{i}"), "permits": 1 + i % 2})),
    );
}

/// Registers `count` API keys `api/key-{i}`, one permit each, with `limits`
/// (the body's `limits` object); returns their `kind/value` names.
pub fn register_keys(cluster: &Cluster, tenant: &str, count: usize, limits: &Value) -> Vec<String> {
    register_keys_with(cluster, tenant, count, &json!({ "limits": limits }))
}

/// `register_keys` with `fields` (a JSON object: `limits`, `groups`) in each body.
pub fn register_keys_with(cluster: &Cluster, tenant: &str, count: usize, fields: &Value) -> Vec<String> {
    let body = |i: usize| {
        let mut body = json!({"kind": "api", "value": format!("key-{i}"), "permits": 1});
        for (name, value) in fields.as_object().expect("fields are an object") {
            body[name] = value.clone();
        }
        body
    };
    register_all(cluster, tenant, (0..count).map(body));
    (0..count).map(|i| format!("api/key-{i}")).collect()
}

/// Sets a quota group's `limits` (`PUT /v1/groups/{name}/limits`), retried as a
/// registration is while the cluster settles.
pub fn set_group(cluster: &Cluster, tenant: &str, name: &str, limits: &Value) {
    let mut client = Client::new(cluster, tenant, 0, Duration::from_secs(5));
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match client.send("PUT", &format!("/v1/groups/{name}/limits"), Some(limits)) {
            Ok((_, r)) if (200..300).contains(&r.status) => return,
            Ok((_, r)) if r.status < 500 && r.status != 421 => panic!("set group {name}: {} {}", r.status, r.body),
            _ => assert!(Instant::now() < deadline, "set group {name}: no server accepted it within 30 s"),
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn register_all(cluster: &Cluster, tenant: &str, bodies: impl Iterator<Item = Value>) {
    let mut client = Client::new(cluster, tenant, 0, Duration::from_secs(5));
    for body in bodies {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match client.send("POST", "/v1/resources", Some(&body)) {
                Ok((_, r)) if r.status == 204 => break,
                Ok((_, r)) if r.status < 500 && r.status != 421 => panic!("register {body}: {} {}", r.status, r.body),
                _ => assert!(Instant::now() < deadline, "register {body}: no server accepted it within 30 s"),
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

struct Shared {
    config: Config,
    cluster: Cluster,
    granted: AtomicUsize,
    stop: AtomicBool,
    /// The newest grant: when, and from which server.
    last: Mutex<(Instant, Option<String>)>,
    faults: Mutex<Vec<Fault>>,
}

impl Shared {
    fn last(&self) -> MutexGuard<'_, (Instant, Option<String>)> {
        self.last.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A workload in progress; dropping it stops the workers.
pub struct Running {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<(Vec<Grant>, Counts)>>,
    started: (Instant, SystemTime),
}

impl Running {
    pub fn start(config: Config, cluster: &Cluster) -> Running {
        let shared = Arc::new(Shared {
            config,
            cluster: cluster.clone(),
            granted: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
            last: Mutex::new((Instant::now(), None)),
            faults: Mutex::default(),
        });
        let workers = (0..shared.config.workers)
            .map(|i| {
                let s = shared.clone();
                std::thread::spawn(move || Worker::new(i, &s).run(&s))
            })
            .collect();
        Running { shared, workers, started: (Instant::now(), SystemTime::now()) }
    }

    fn granted(&self) -> usize {
        self.shared.granted.load(Ordering::Relaxed)
    }

    /// Blocks until `n` grants were made; panics when the cluster stalls or
    /// a worker failed (workers end early only by panicking).
    pub fn wait_for(&self, n: usize) {
        while self.granted() < n {
            self.assert_running(&format!("{} of {n} granted", self.granted()));
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Blocks until `at`, with the same checks as `wait_for`.
    pub fn wait_until(&self, at: Instant) {
        while Instant::now() < at {
            self.assert_running(&format!("{} granted", self.granted()));
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn assert_running(&self, progress: &str) {
        assert!(!self.workers.iter().any(JoinHandle::is_finished), "a worker failed: its panic is above");
        let since = self.shared.last().0.elapsed();
        assert!(since < self.shared.config.stall, "no grant for {since:?} ({progress}): the cluster stalled");
    }

    /// The server of the newest grant: in sharded mode, the tenant's owner.
    pub fn last_server(&self) -> String {
        self.shared.last().1.clone().expect("a grant was made")
    }

    /// Notes that a fault is injected now.
    pub fn fault(&self, name: &str) {
        self.shared
            .faults
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Fault { name: name.into(), at: Instant::now() });
    }

    /// Waits for the configured number of grants, stops the workers and
    /// hands over what they saw.
    pub fn finish(self) -> Records {
        self.wait_for(self.shared.config.grants);
        self.stop()
    }

    /// Stops the workers now and hands over what they saw. The run ends
    /// here, not once the last holder let go: no acquire is sent after it.
    pub fn stop(mut self) -> Records {
        let stopped = (Instant::now(), SystemTime::now());
        self.shared.stop.store(true, Ordering::Relaxed);
        let mut records = Records::default();
        for w in self.workers.drain(..) {
            let (grants, counts) = w.join().expect("a worker panicked");
            records.grants.extend(grants);
            records.counts.add(&counts);
        }
        records.faults = std::mem::take(&mut *self.shared.faults.lock().unwrap_or_else(|e| e.into_inner()));
        records.span = Some((self.started.0, stopped.0));
        records.wall_span = Some((self.started.1, stopped.1));
        records
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
    }
}

struct Worker {
    id: usize,
    client: Client,
    downstream: Downstream,
    rng: u64,
    grants: Vec<Grant>,
    counts: Counts,
}

/// A lease as the acquire reply describes it.
struct Lease {
    id: u64,
    kind: String,
    value: String,
    permit: u32,
    token: u64,
    ttl: Duration,
}

impl Lease {
    fn parse(v: &Value) -> Lease {
        let field = |name: &str| v[name].as_u64().unwrap_or_else(|| panic!("lease without {name}: {v}"));
        let text = |name: &str| v[name].as_str().unwrap_or_else(|| panic!("lease without {name}: {v}")).to_owned();
        let ttl_ms = v["ttl_ms"].as_f64().unwrap_or_else(|| panic!("lease without ttl_ms: {v}"));
        Lease {
            id: field("id"),
            kind: text("kind"),
            value: text("value"),
            permit: u32::try_from(field("permit")).expect("permits fit u32"),
            token: field("token"),
            ttl: Duration::from_secs_f64(ttl_ms / 1e3),
        }
    }
}

impl Worker {
    fn new(id: usize, shared: &Shared) -> Worker {
        let c = &shared.config;
        Worker {
            id,
            client: Client::new(&shared.cluster, &c.tenant, id, c.timeout),
            downstream: Downstream::open(&c.downstream_url, &c.downstream_table),
            rng: 0x9e37_79b9_7f4a_7c15 ^ id as u64,
            grants: Vec::new(),
            counts: Counts::default(),
        }
    }

    /// splitmix64: enough randomness for hold times and contexts.
    fn random(&mut self, below: u64) -> u64 {
        self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) % below.max(1)
    }

    fn run(mut self, shared: &Shared) -> (Vec<Grant>, Counts) {
        while !shared.stop.load(Ordering::Relaxed) && shared.granted.load(Ordering::Relaxed) < shared.config.grants {
            let context = format!("site-{}", self.random(shared.config.contexts as u64));
            let cost = shared.config.cost.map(|(lo, hi)| lo + self.random(hi - lo + 1));
            let Some((sent, server, lease)) = self.acquire(shared, &context, cost) else { break };
            let granted = Instant::now();
            let granted_at = SystemTime::now();
            shared.granted.fetch_add(1, Ordering::Relaxed);
            *shared.last() = (granted, Some(server.clone()));
            let mut grant = Grant {
                worker: self.id,
                server,
                resource: format!("{}/{}", lease.kind, lease.value),
                permit: lease.permit,
                token: lease.token,
                sent: sent.0,
                granted,
                released: granted,
                release_acknowledged: None,
                ttl: lease.ttl,
                sent_at: sent.1,
                granted_at,
                cost: cost.unwrap_or(1),
                used: cost.unwrap_or(1),
            };
            let (lo, hi) = shared.config.hold;
            let hold = match shared.config.long_hold {
                Some((one_in, long)) if self.random(one_in) == 0 => long,
                _ => lo + Duration::from_micros(self.random((hi - lo).as_micros() as u64 + 1)),
            };
            let used = self.use_lease(&grant, hold);
            if !used {
                self.counts.leases_lost += 1;
            }
            if let Some(cost) = cost {
                grant.used = cost / 2 + self.random(cost - cost / 2 + 1);
                self.reconcile(&lease, grant.used);
            }
            self.report(&lease, &context, hold, used);
            grant.released = Instant::now();
            grant.release_acknowledged = self.release(&lease);
            self.grants.push(grant);
        }
        (self.grants, self.counts)
    }

    /// Retries until a grant, or `None` once the workload stops. The grant
    /// comes with when its request was sent, on both clocks.
    fn acquire(
        &mut self,
        shared: &Shared,
        context: &str,
        cost: Option<u64>,
    ) -> Option<((Instant, SystemTime), String, Lease)> {
        let body = match cost {
            Some(cost) => json!({ "context": context, "cost": cost }),
            None => json!({ "context": context }),
        };
        let mut backoff = Duration::from_millis(1);
        while !shared.stop.load(Ordering::Relaxed) {
            let sent = (Instant::now(), SystemTime::now());
            match self.client.send("POST", "/v1/leases", Some(&body)) {
                Ok((server, r)) if r.status == 201 => return Some((sent, server, Lease::parse(&r.json()))),
                // Nothing free (or every resource at its limit): wait and retry.
                Ok((_, r)) if r.status == 409 => self.counts.acquires_refused += 1,
                // Rate limited, or a takeover under way: wait and retry.
                Ok((_, r)) if matches!(r.status, 421 | 429) => {}
                Ok((_, r)) if r.status >= 500 => self.client.move_on(),
                Ok((server, r)) => panic!("acquire at {server}: unexpected {} {}", r.status, r.body),
                Err(_) => {}
            }
            std::thread::sleep(backoff + Duration::from_micros(self.random(1000)));
            backoff = (backoff * 2).min(Duration::from_millis(50));
        }
        None
    }

    /// The holder's work: a fenced "start" write, the hold, a fenced "end"
    /// write, all before the local deadline. `false` when the lease was lost
    /// on the way (deadline passed, or a later holder's token was seen).
    fn use_lease(&mut self, grant: &Grant, hold: Duration) -> bool {
        if !self.fenced_write(grant, "start") {
            return false;
        }
        std::thread::sleep(hold);
        self.fenced_write(grant, "end")
    }

    fn fenced_write(&mut self, grant: &Grant, phase: &str) -> bool {
        let value = format!("{phase} by worker {} with token {}", self.id, grant.token);
        while Instant::now() < grant.deadline() {
            match self.downstream.write(&grant.resource, grant.permit, grant.token, &value) {
                Ok(Fenced::Written) => return true,
                Ok(Fenced::Refused) => {
                    self.counts.downstream_refused += 1;
                    return false;
                }
                // The database is restarting: retry while the lease lasts.
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
        false
    }

    /// Reports how the use went. Retried only when the request cannot have
    /// been seen, so the report log never holds more copies than were sent.
    fn report(&mut self, lease: &Lease, context: &str, hold: Duration, used: bool) {
        let outcome = if !used || self.random(20) == 0 { "slow" } else { "success" };
        let body = json!({
            "kind": lease.kind, "value": lease.value, "context": context,
            "outcome": outcome, "latency_ms": hold.as_secs_f64() * 1e3,
        });
        for _ in 0..3 {
            match self.client.send("POST", "/v1/outcomes", Some(&body)) {
                Ok((_, r)) if (200..300).contains(&r.status) => {
                    self.counts.reports_acknowledged += 1;
                    return;
                }
                // Refused by a non-owner, or never delivered: not applied, so safe to send again.
                Ok((_, r)) if r.status == 421 => {}
                Err(Unanswered::Unsent) => {}
                Ok((server, r)) if r.status < 500 => panic!("report at {server}: unexpected {} {}", r.status, r.body),
                Ok(_) | Err(Unanswered::Unknown) => break,
            }
        }
        self.counts.reports_unacknowledged += 1;
    }

    /// Tells the authority the lease used `used` of the tokens it reserved.
    /// Setting the count is idempotent, so any failure is retried.
    fn reconcile(&mut self, lease: &Lease, used: u64) {
        let path = format!("/v1/leases/{}/usage", lease.id);
        let body = json!({ "token": lease.token, "used": used });
        for _ in 0..3 {
            match self.client.send("POST", &path, Some(&body)) {
                Ok((_, r)) if r.status == 204 => return,
                Ok((server, r)) if r.status == 400 => panic!("reconcile at {server}: {} {}", r.status, r.body),
                Ok(_) | Err(_) => {}
            }
        }
        self.counts.reconciles_failed += 1;
    }

    /// When the release was acknowledged; `None` if it was not.
    fn release(&mut self, lease: &Lease) -> Option<Instant> {
        let path = format!("/v1/leases/{}?token={}", lease.id, lease.token);
        for _ in 0..3 {
            match self.client.send("DELETE", &path, None) {
                Ok((_, r)) if r.status == 204 => return Some(Instant::now()),
                Err(Unanswered::Unsent) => {}
                Ok(_) | Err(Unanswered::Unknown) => break,
            }
        }
        self.counts.releases_failed += 1;
        None
    }
}
