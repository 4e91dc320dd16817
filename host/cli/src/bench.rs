//! `repute bench`: a load generator. Threads run acquire + release pairs (and
//! optionally a report per pair) against an embedded pool or a running
//! server, for a duration or a count, and the run ends with throughput and
//! latency percentiles.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use indicatif::{ProgressBar, ProgressStyle};
use repute_host::{Outcome, Policy, PoolOps, PoolSet, ShardLimits, Strategy, TenantConfig};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// `embedded`, or the base URL of a running `repute serve` (e.g. http://127.0.0.1:7070).
    #[arg(long, env = "REPUTE_BENCH_TARGET", default_value = "embedded")]
    pub target: String,
    /// API key for a server target.
    #[arg(long, env = "REPUTE_API_KEY")]
    pub api_key: Option<String>,
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Stop after this many seconds (the default stop)...
    #[arg(long, default_value_t = 5.0)]
    pub duration: f64,
    /// ...or after this many pairs in all, whichever is given.
    #[arg(long)]
    pub count: Option<u64>,
    /// Resources registered before the run.
    #[arg(long, default_value_t = 1000)]
    pub resources: usize,
    /// Contexts the pairs rotate over.
    #[arg(long, default_value_t = 10)]
    pub contexts: usize,
    /// Also report an outcome with every pair.
    #[arg(long)]
    pub report: bool,
    /// Embedded: tenants (one per thread when equal to threads: no shared lock); shards default to threads.
    #[arg(long, default_value_t = 1)]
    pub tenants: usize,
    /// Embedded store.
    #[arg(long, default_value = "memory")]
    pub store: repute_host::StoreSpec,
    #[arg(long)]
    pub strategy: Option<String>,
}

/// The numbers a run ends with.
#[derive(Debug, Clone)]
pub struct Summary {
    pub pairs: u64,
    pub errors: u64,
    pub seconds: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
}

impl Summary {
    pub fn pairs_per_second(&self) -> f64 {
        self.pairs as f64 / self.seconds
    }
}

/// One thread's way of doing a pair.
trait Target: Send {
    fn pair(&mut self, context: &str, report: bool) -> Result<(), String>;
}

struct Embedded {
    set: Arc<PoolSet>,
    tenant: String,
}

impl Target for Embedded {
    fn pair(&mut self, context: &str, report: bool) -> Result<(), String> {
        let ok = Outcome::Success { latency_ms: 20.0 };
        self.set
            .with(&self.tenant, |p| {
                let lease = p.acquire(context)?;
                if report {
                    p.report(lease.resource.kind(), lease.resource.value(), context, &ok)?;
                }
                p.release(lease.id, lease.token)
            })
            .and_then(|r| r)
            .map_err(|e| e.to_string())
    }
}

struct Remote {
    agent: ureq::Agent,
    base: String,
    key: Option<String>,
}

impl Remote {
    fn send(&self, method: &str, path: &str, body: Option<serde_json::Value>) -> Result<serde_json::Value, String> {
        let mut req = self.agent.request(method, &format!("{}{path}", self.base));
        if let Some(k) = &self.key {
            req = req.set("Authorization", &format!("Bearer {k}"));
        }
        let res = match body {
            Some(b) => req.send_json(b),
            None => req.call(),
        }
        .map_err(|e| e.to_string())?;
        if res.status() == 204 {
            return Ok(serde_json::Value::Null);
        }
        res.into_json().map_err(|e| e.to_string())
    }
}

impl Target for Remote {
    fn pair(&mut self, context: &str, report: bool) -> Result<(), String> {
        let lease = self.send("POST", "/v1/leases", Some(serde_json::json!({ "context": context })))?;
        if report {
            let body = serde_json::json!({
                "kind": lease["kind"], "value": lease["value"], "context": context,
                "outcome": "success", "latency_ms": 20.0,
            });
            self.send("POST", "/v1/outcomes", Some(body))?;
        }
        self.send("DELETE", &format!("/v1/leases/{}?token={}", lease["id"], lease["token"]), None).map(|_| ())
    }
}

fn policy(args: &Args) -> Result<Policy, String> {
    let mut p = Policy::default();
    if let Some(s) = &args.strategy {
        p.strategy = Strategy::parse(s).map_err(|_| format!("--strategy {s:?}: must be thompson, classic or first"))?;
    }
    Ok(p)
}

/// The load's targets, and for a server the resources registered for the
/// run, which `run` removes again once it ends.
type Targets = (Vec<Box<dyn Target>>, Option<(Remote, Vec<String>)>);

fn targets(args: &Args) -> Result<Targets, String> {
    let kinds = (0..args.resources).map(|i| format!("10.{}.{}.{}:8080", i >> 16 & 255, i >> 8 & 255, i & 255));
    if args.target == "embedded" {
        let tenants = args.tenants.max(1);
        let set = Arc::new(PoolSet::new(args.threads.max(tenants), ShardLimits::default()).map_err(|e| e.to_string())?);
        let clock: Arc<dyn repute_host::Clock> = Arc::new(repute_host::SystemClock::new());
        let store = args.store.open().map_err(|e| e.to_string())?;
        for t in 0..tenants {
            let name = format!("bench-{t}");
            let providers = store.providers(&name, 0, clock.clone()).map_err(|e| e.to_string())?;
            let config = TenantConfig { policy: policy(args)?, seed: t as u64, durable: args.store.durable() };
            set.open_tenant(&name, config, providers).map_err(|e| e.to_string())?;
            for v in kinds.clone() {
                set.with(&name, |p| p.register("proxy", &v, 1)).and_then(|r| r).map_err(|e| e.to_string())?;
            }
        }
        let targets = (0..args.threads)
            .map(|i| {
                Box::new(Embedded { set: set.clone(), tenant: format!("bench-{}", i % tenants) }) as Box<dyn Target>
            })
            .collect();
        return Ok((targets, None));
    }
    let remote = |_| Remote {
        agent: ureq::AgentBuilder::new().timeout(Duration::from_secs(10)).build(),
        base: args.target.trim_end_matches('/').to_owned(),
        key: args.api_key.clone(),
    };
    let first = remote(0);
    let mut registered = Vec::with_capacity(args.resources);
    for v in kinds {
        let sent = first.send("POST", "/v1/resources", Some(serde_json::json!({"kind": "proxy", "value": v})));
        if let Err(e) = sent {
            remove(&first, &registered)?;
            return Err(e);
        }
        registered.push(v);
    }
    let targets = (0..args.threads).map(|i| Box::new(remote(i)) as Box<dyn Target>).collect();
    Ok((targets, Some((first, registered))))
}

/// Unregisters what a run registered on a server (revoking leases a failed
/// pair left), so a bench leaves the tenant as it found it.
fn remove(remote: &Remote, values: &[String]) -> Result<(), String> {
    for v in values {
        let value = percent_encoding::utf8_percent_encode(v, percent_encoding::NON_ALPHANUMERIC);
        remote
            .send("DELETE", &format!("/v1/resources/proxy/{value}?force=true"), None)
            .map_err(|e| format!("removing the bench's resource proxy/{v}: {e}"))?;
    }
    Ok(())
}

/// How a run shows that it is under way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// Short runs, and callers that only want the summary.
    Off,
    /// A bar redrawn in place, for a person at a terminal.
    Bar,
    /// A line every `LINE_EVERY`, for a log or a pipe, where a bar would
    /// print nothing (or a line per redraw).
    Lines,
}

/// How often `Progress::Lines` prints.
const LINE_EVERY: Duration = Duration::from_secs(2);

/// Runs the load and returns its summary.
pub fn run(args: &Args, progress: Progress) -> Result<Summary, String> {
    if args.threads == 0 || args.contexts == 0 || args.resources == 0 {
        return Err("--threads, --contexts and --resources must be at least 1".into());
    }
    if !(args.duration.is_finite() && args.duration > 0.0) {
        return Err("--duration: must be a positive number of seconds".into());
    }
    let (targets, registered) = targets(args)?;
    let deadline = Duration::from_secs_f64(args.duration);
    let done = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let bar = (progress == Progress::Bar).then(|| {
        let bar = match args.count {
            Some(n) => ProgressBar::new(n),
            None => ProgressBar::new(deadline.as_secs().max(1)),
        };
        let template = match args.count {
            Some(_) => "{bar:40} {pos}/{len} pairs · {per_sec} · eta {eta} · {msg}",
            None => "{bar:40} {pos}/{len} s · {msg}",
        };
        bar.set_style(ProgressStyle::with_template(template).expect("valid template"));
        bar
    });
    let contexts: Arc<Vec<String>> = Arc::new((0..args.contexts).map(|i| format!("site-{i}.example")).collect());
    let start = Instant::now();
    let handles: Vec<_> = targets
        .into_iter()
        .enumerate()
        .map(|(t, mut target)| {
            let (done, errors, contexts) = (done.clone(), errors.clone(), contexts.clone());
            let (count, report) = (args.count, args.report);
            std::thread::spawn(move || {
                let mut hist = Histogram::<u64>::new(3).expect("valid precision");
                let mut i = t;
                loop {
                    let n = done.fetch_add(1, Ordering::Relaxed);
                    if count.map_or(start.elapsed() >= deadline, |c| n >= c) {
                        done.fetch_sub(1, Ordering::Relaxed);
                        return hist;
                    }
                    let t0 = Instant::now();
                    if target.pair(&contexts[i % contexts.len()], report).is_err() {
                        errors.fetch_add(1, Ordering::Relaxed);
                    }
                    let _ = hist.record(t0.elapsed().as_nanos() as u64);
                    i += 1;
                }
            })
        })
        .collect();
    let mut next_line = LINE_EVERY;
    while progress != Progress::Off && !handles.iter().all(|h| h.is_finished()) {
        std::thread::sleep(Duration::from_millis(100));
        let (pairs, failed, elapsed) = (done.load(Ordering::Relaxed), errors.load(Ordering::Relaxed), start.elapsed());
        let rate = pairs as f64 / elapsed.as_secs_f64().max(1e-3);
        if let Some(bar) = &bar {
            bar.set_position(if args.count.is_some() { pairs } else { elapsed.as_secs() });
            bar.set_message(format!("{pairs} pairs · {rate:.0} pairs/s · errors {failed}"));
        } else if elapsed >= next_line {
            let (of, pairs) = match args.count {
                Some(n) => (String::new(), format!("{pairs} of {n} pairs")),
                None => (format!(" of {:.0} s", deadline.as_secs_f64()), format!("{pairs} pairs")),
            };
            eprintln!("bench: {:.0} s{of}: {pairs}, {rate:.0} pairs/s, errors {failed}", elapsed.as_secs_f64());
            next_line += LINE_EVERY;
        }
    }
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }
    let mut hist = Histogram::<u64>::new(3).expect("valid precision");
    let joined: Result<Vec<_>, _> = handles.into_iter().map(|h| h.join()).collect();
    let seconds = start.elapsed().as_secs_f64();
    if let Some((remote, values)) = &registered {
        remove(remote, values)?;
    }
    for h in joined.map_err(|_| "a load thread panicked".to_owned())? {
        hist.add(h).map_err(|e| e.to_string())?;
    }
    let us = |q: f64| hist.value_at_quantile(q) as f64 / 1000.0;
    Ok(Summary {
        pairs: hist.len(),
        errors: errors.load(Ordering::Relaxed),
        seconds,
        p50_us: us(0.5),
        p99_us: us(0.99),
        p999_us: us(0.999),
        max_us: hist.max() as f64 / 1000.0,
    })
}

pub fn main(args: &Args) -> Result<(), String> {
    use std::io::IsTerminal;
    let long = args.count.is_some_and(|c| c > 100_000) || (args.count.is_none() && args.duration > 2.0);
    let progress = match (long, std::io::stderr().is_terminal()) {
        (false, _) => Progress::Off,
        (true, true) => Progress::Bar,
        (true, false) => Progress::Lines,
    };
    if long && args.target != "embedded" {
        eprintln!("bench: registering {} resources on {}", args.resources, args.target);
    }
    let s = run(args, progress)?;
    println!(
        "{} pairs in {:.2} s on {} thread(s): {:.0} pairs/s ({:.2} µs/pair/thread) · errors {}",
        s.pairs,
        s.seconds,
        args.threads,
        s.pairs_per_second(),
        s.seconds * 1e6 * args.threads as f64 / s.pairs.max(1) as f64,
        s.errors
    );
    println!(
        "latency per pair: p50 {:.2} µs · p99 {:.2} µs · p99.9 {:.2} µs · max {:.2} µs",
        s.p50_us, s.p99_us, s.p999_us, s.max_us
    );
    Ok(())
}
