//! The built-in scenarios: a hidden truth (success probability, failure kind
//! and latency of every resource in every context, at every instant) that the
//! strategies must discover from outcomes alone, and the request stream that
//! every strategy faces identically.
//!
//! Shared by the proxy scenarios ("the pool"): 20 proxies `r00`..`r19`, one permit
//! each, serving four sites with 40/30/20/10% of the traffic; requests arrive
//! as a Poisson stream, one every 200 ms on average (about 3 leases in flight).
//! Every proxy has a base success probability per site from its tier, drawn
//! once: 6 premium (0.95–0.99), 10 standard (0.80–0.93), 4 poor (0.40–0.70),
//! each ± 0.03 per site, tiers shuffled over the names; and a median latency
//! (80–900 ms, log-normal spread σ = 0.35). A client times out after 3 s.
//! A failure on a site that bans the proxy is `blocked` (a fast 403, 50–300 ms);
//! any other failure is `timeout` (40%, at 3 s), `connection_reset` (35%,
//! 20–300 ms) or `slow` (25%, the answer came too late to use, 2–3 s). A banned
//! proxy still gets 3% of requests through (unprotected pages).
//!
//! The api-keys scenarios have their own truth (see [`Kind::ApiKeys`] and
//! [`Kind::Projects`]): the same arrivals and shares, over 20 keys and 4
//! models instead of proxies and sites.

use std::collections::VecDeque;
use std::fmt;

use repute_core::{Outcome, SECOND};

use super::rng::Rng;

mod world;

pub use world::World;

pub const RESOURCES: usize = 20;
/// Contexts of every scenario: sites for the proxies, models for the keys.
pub const CONTEXTS: usize = 4;
pub const SITES: [&str; CONTEXTS] = ["shop.example", "news.example", "api.example", "search.example"];
pub const MODELS: [&str; CONTEXTS] = ["chat-large", "chat-small", "embedding", "vision"];
const SHARE: [f64; CONTEXTS] = [0.4, 0.3, 0.2, 0.1];
const MEAN_ARRIVAL_NS: f64 = 0.2 * SECOND as f64;
const TIMEOUT_MS: f64 = 3000.0;
const BANNED_P: f64 = 0.03;
pub const MINUTE: u64 = 60 * SECOND;
/// Proxies per subnet, the unit a ban wave takes out (bursts).
const SUBNET: usize = 5;
/// Requests a key may make per model in any 60 s (api-keys).
pub const RPM_LIMIT: usize = 20;
/// Keys per project, `k00`..`k04` the first (projects).
pub const PROJECT_KEYS: usize = 5;
pub const PROJECTS: usize = RESOURCES / PROJECT_KEYS;
/// Requests a project's keys may make together in any 60 s (projects).
pub const PROJECT_RPM: usize = 90;
/// Mean lifetime of a key before it is revoked (api-keys): about a quarter
/// of the keys die during a 66-minute run.
const KEY_LIFETIME_NS: f64 = 4.0 * 3600.0 * SECOND as f64;
/// Per model: success probability of a healthy key, median latency (ms).
const MODEL_P: [f64; CONTEXTS] = [0.97, 0.985, 0.995, 0.95];
const MODEL_MEDIAN_MS: [f64; CONTEXTS] = [1500.0, 500.0, 120.0, 2000.0];
/// Share of (key, model) pairs served from an overloaded deployment.
const DEGRADED_SHARE: f64 = 0.3;
/// The provider's gateway gives up after this long (api-keys): a 504.
const GATEWAY_TIMEOUT_MS: f64 = 5000.0;

/// Which hidden truth to simulate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The baseline: the pool as described above, unchanging. The strategies
    /// must find the premium proxies per site and keep using them.
    Steady,
    /// Proxies degrade and recover: each one, independently, goes through
    /// episodes (gaps exponential with mean 20 min, lasting 3–10 min) where its
    /// success probability falls linearly over the first quarter to a floor of
    /// 0.05–0.40 on every site, holds, and climbs back over the last quarter;
    /// its latency triples at the bottom. About a quarter of the pool is
    /// degraded at any time, premium proxies included.
    Drift,
    /// Good for one site, banned on another: ranking proxies by base quality,
    /// shop.example bans ranks 0, 2, 4 (three of the six premium) plus each
    /// other proxy with probability 0.4; search.example bans ranks 1 and 3 plus
    /// each other with probability 0.25; news and api ban none. A ban lasts the
    /// whole run, so the best proxy overall is useless on the biggest site.
    Context,
    /// Bursts of `blocked`: the proxies sit in four subnets of five
    /// (`r00`–`r04`, `r05`–`r09`, ...; tiers are shuffled over names, so each
    /// subnet mixes tiers). On each site, ban waves arrive as a Poisson stream
    /// (mean gap 10 min); a wave bans one random subnet, a quarter of the pool,
    /// for 1–4 min (a WAF flagging an address range), then lifts completely.
    Bursts,
    /// An LLM provider behind 20 API keys `k00`..`k19` (one request at a
    /// time each), with the models `chat-large`, `chat-small`, `embedding`
    /// and `vision` as contexts (40/30/20/10% of the traffic, 5 requests/s).
    /// The provider counts every key's accepted requests per model in a
    /// sliding 60 s window (per model, as LLM providers count them) and
    /// answers the 21st with a 429 whose Retry-After is the exact wait until
    /// the oldest request leaves the window (20–80 ms, not counted). The
    /// largest model's demand (120 rpm) is six keys' worth, the smallest
    /// (30 rpm) more than one; all keys together allow 400 rpm per model.
    /// Each key is revoked after an exponential lifetime (mean 4 h, so about
    /// five keys die during a run) and answers every later request with a
    /// 401 (40–120 ms). A healthy key succeeds with the model's rate (0.97,
    /// 0.985, 0.995, 0.95) ± 0.015; 30% of (key, model) pairs are served from
    /// an overloaded deployment and succeed with 0.55–0.85. A failure is a
    /// 500 (70%, 150–900 ms) or a 504 at 5 s. Latency: the model's median
    /// (1500, 500, 120, 2000 ms) × a key factor (0.8–1.25, the key's region),
    /// log-normal σ = 0.35.
    ApiKeys,
    /// The api-keys provider as OpenAI and Mistral count quotas: per
    /// project, not per key. The 20 keys belong to four projects of five
    /// (`k00`–`k04` the first); the provider counts a project's accepted
    /// requests, over every model and every key of it, in a sliding 60 s
    /// window of 90 and answers the next with a 429 whose Retry-After is the
    /// exact wait until the oldest leaves (20–80 ms, not counted); no key
    /// has a limit of its own. The four projects allow 360 requests a
    /// minute against a demand of about 300. Keys, revocations, success
    /// rates, failures and latencies as in api-keys (their own draw).
    Projects,
    /// Sites that count, and say so only by answering: the steady pool's
    /// proxies, against sites that each count every proxy's requests in
    /// fixed slices they do not publish (shop and news 2 per 5 s, api 3 per
    /// 5 s, search 1 per 10 s, all well above the demand the pool as a
    /// whole carries) and answer the next request of a slice with a 429
    /// whose Retry-After is the whole seconds to the slice's end (10–50 ms,
    /// not counted), as sites and OpenAI's quantized limits do. A proxy that
    /// meets 3 of them on a site within 60 s is banned there for 2–10 min
    /// (a fast 403, `blocked`), as anti-bot rules escalate; the ban is drawn
    /// from the request that trips it. Each site also goes through
    /// overloads (gaps exponential with mean 15 min, lasting 1–2 min) in
    /// which half its answers, through any proxy, are a 503 (20–300 ms), which
    /// the proxy profile reads as `connection_reset`. No pool is told a limit.
    Limits,
}

impl Kind {
    pub const ALL: [Kind; 7] =
        [Kind::Steady, Kind::Drift, Kind::Context, Kind::Bursts, Kind::ApiKeys, Kind::Limits, Kind::Projects];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Steady => "steady",
            Kind::Drift => "drift",
            Kind::Context => "context",
            Kind::Bursts => "bursts",
            Kind::ApiKeys => "api-keys",
            Kind::Limits => "limits",
            Kind::Projects => "projects",
        }
    }

    fn salt(self) -> u64 {
        match self {
            Kind::Steady => 1,
            Kind::Drift => 2,
            Kind::Context => 3,
            Kind::Bursts => 4,
            Kind::ApiKeys => 5,
            Kind::Limits => 6,
            Kind::Projects => 7,
        }
    }

    /// The context names requests are for.
    pub fn contexts(self) -> [&'static str; CONTEXTS] {
        if self.keys() {
            MODELS
        } else {
            SITES
        }
    }

    /// Whether the resources are API keys of an LLM provider.
    pub fn keys(self) -> bool {
        matches!(self, Kind::ApiKeys | Kind::Projects)
    }

    /// The quota group key `r` belongs to (projects).
    pub fn project(r: usize) -> String {
        format!("project:p{}", r / PROJECT_KEYS)
    }

    /// The name of resource `r`: `r00`.. for proxies, `k00`.. for keys.
    pub fn resource_name(self, r: usize) -> String {
        let prefix = if self.keys() { 'k' } else { 'r' };
        format!("{prefix}{r:02}")
    }

    /// The resource kind and the plural nouns of resources and contexts.
    pub fn nouns(self) -> (&'static str, &'static str, &'static str) {
        if self.keys() {
            ("key", "keys", "models")
        } else {
            ("proxy", "proxies", "sites")
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What the client saw on the wire, for the baselines that react to HTTP
/// statuses (Crawlee's blocked status codes, LiteLLM's cooldown rules); the
/// pool is told the [`Outcome`], as `report_http` would tell it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    /// A response with this status. A `slow` failure is a 200 that came too late to use.
    Status(u16),
    /// The connection dropped before any response.
    Reset,
    /// The client gave up waiting.
    Timeout,
}

/// One answer of the world: what the pool is told and what the wire showed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Answer {
    pub outcome: Outcome,
    pub wire: Wire,
}

/// A site's unpublished limit per proxy (limits): requests per slice.
#[derive(Debug, Clone, Copy)]
pub struct SliceLimit {
    pub slice: u64,
    pub per_slice: u32,
}

/// Per site (shop, news, api, search).
pub const SLICE_LIMITS: [SliceLimit; CONTEXTS] = [
    SliceLimit { slice: 5 * SECOND, per_slice: 2 },
    SliceLimit { slice: 5 * SECOND, per_slice: 2 },
    SliceLimit { slice: 5 * SECOND, per_slice: 3 },
    SliceLimit { slice: 10 * SECOND, per_slice: 1 },
];
/// Answers of 429 to one proxy on one site within `ESCALATE_WINDOW` that
/// get it banned there (limits).
pub const ESCALATE_AFTER: usize = 3;
pub const ESCALATE_WINDOW: u64 = MINUTE;

/// What the world counts of a run's own requests: the provider's
/// per-(key, model) log for the rpm limit (api-keys); the sites' slice
/// counts, 429 answers and the bans they escalate to (limits). It depends
/// on what a strategy chose, so every run keeps its own.
#[derive(Debug, Clone, Default)]
pub struct Windows {
    /// Start times of the accepted requests of the last 60 s, `[resource * CONTEXTS + context]`, oldest first.
    accepted: Vec<VecDeque<u64>>,
    /// The current slice's number and its requests, `[resource * CONTEXTS + context]`.
    slices: Vec<(u64, u32)>,
    /// Times of the answers of 429 within `ESCALATE_WINDOW`, oldest first.
    refused: Vec<VecDeque<u64>>,
    /// When a ban the site escalated to ends.
    banned_until: Vec<u64>,
    /// Start times of each project's accepted requests of the last 60 s, oldest first (projects).
    projects: Vec<VecDeque<u64>>,
}

impl Windows {
    pub fn new() -> Windows {
        let cells = RESOURCES * CONTEXTS;
        Windows {
            accepted: vec![VecDeque::new(); cells],
            slices: vec![(0, 0); cells],
            refused: vec![VecDeque::new(); cells],
            banned_until: vec![0; cells],
            projects: vec![VecDeque::new(); PROJECTS],
        }
    }

    /// Whether the site has banned proxy `r` at `t` for going on over its limit.
    fn escalated(&self, r: usize, site: usize, t: u64) -> bool {
        t < self.banned_until[r * CONTEXTS + site]
    }

    /// Counts a request of proxy `r` on `site` at `t` in its slice; `Err(wait)`
    /// when the slice is full: whole seconds to the slice's end.
    fn take_slice(&mut self, r: usize, site: usize, t: u64) -> Result<(), u64> {
        let limit = SLICE_LIMITS[site];
        let n = t / limit.slice;
        let slot = &mut self.slices[r * CONTEXTS + site];
        if slot.0 != n {
            *slot = (n, 0);
        }
        if slot.1 >= limit.per_slice {
            let end = (n + 1) * limit.slice;
            return Err((end - t).div_ceil(SECOND).max(1) * SECOND);
        }
        slot.1 += 1;
        Ok(())
    }

    /// Records a 429 to proxy `r` on `site` at `t`; bans it there for `ban`
    /// from `t` when it is the `ESCALATE_AFTER`th within the window.
    fn refuse(&mut self, r: usize, site: usize, t: u64, ban: u64) {
        let log = &mut self.refused[r * CONTEXTS + site];
        while log.front().is_some_and(|&at| at + ESCALATE_WINDOW <= t) {
            log.pop_front();
        }
        log.push_back(t);
        if log.len() >= ESCALATE_AFTER {
            log.clear();
            self.banned_until[r * CONTEXTS + site] = t + ban;
        }
    }

    /// Whether proxy `r` may make a request for `site` at `t` without a
    /// 429 or a 403 of the site's own making (what the oracle knows, limits).
    pub fn site_admits(&self, r: usize, site: usize, t: u64) -> bool {
        let limit = SLICE_LIMITS[site];
        let (n, count) = self.slices[r * CONTEXTS + site];
        let full = n == t / limit.slice && count >= limit.per_slice;
        !full && !self.escalated(r, site, t)
    }

    /// Forgets what left the window by `t`; `Err(wait)` when the window is
    /// full: the exact time until its oldest request leaves it.
    fn room(&mut self, r: usize, ctx: usize, t: u64) -> Result<(), u64> {
        let log = &mut self.accepted[r * CONTEXTS + ctx];
        while log.front().is_some_and(|&at| at + MINUTE <= t) {
            log.pop_front();
        }
        match log.front() {
            Some(&oldest) if log.len() >= RPM_LIMIT => Err(oldest + MINUTE - t),
            _ => Ok(()),
        }
    }

    /// Forgets what left key `r`'s project window by `t`; `Err(wait)` when
    /// it is full: the exact time until its oldest request leaves it.
    fn project_room(&mut self, r: usize, t: u64) -> Result<(), u64> {
        let log = &mut self.projects[r / PROJECT_KEYS];
        while log.front().is_some_and(|&at| at + MINUTE <= t) {
            log.pop_front();
        }
        match log.front() {
            Some(&oldest) if log.len() >= PROJECT_RPM => Err(oldest + MINUTE - t),
            _ => Ok(()),
        }
    }

    /// Whether key `r` may make a request for `ctx` at `t`, by its own
    /// window and its project's (what the oracle knows).
    pub fn has_room(&self, r: usize, ctx: usize, t: u64) -> bool {
        let live = |log: &VecDeque<u64>| log.iter().filter(|&&at| at + MINUTE > t).count();
        live(&self.accepted[r * CONTEXTS + ctx]) < RPM_LIMIT && live(&self.projects[r / PROJECT_KEYS]) < PROJECT_RPM
    }
}

/// The per-request randomness, drawn once so every strategy sees the same
/// arrivals, the same sites and the same luck: a request succeeds when
/// `u < p(chosen proxy)`, so a better choice never turns a success into a failure.
#[derive(Debug, Clone, Copy)]
pub struct Draw {
    pub u: f64,
    pub kind: f64,
    pub z: f64,
}

impl Draw {
    pub fn new(rng: &mut Rng) -> Draw {
        Draw { u: rng.unit(), kind: rng.unit(), z: rng.normal() }
    }
}

#[derive(Debug, Clone, Copy)]
pub struct Request {
    pub at: u64,
    pub site: usize,
    pub draw: Draw,
}

/// The request stream of a scenario: Poisson arrivals, contexts by traffic share.
pub fn requests(kind: Kind, n: u32, seed: u64) -> Vec<Request> {
    let mut rng = Rng::stream(seed, 100 + kind.salt());
    let mut at = 0.0;
    (0..n)
        .map(|_| {
            at += rng.exponential(MEAN_ARRIVAL_NS);
            let x = rng.unit();
            let mut acc = 0.0;
            let site = SHARE.iter().position(|s| {
                acc += s;
                x < acc
            });
            Request { at: at as u64, site: site.unwrap_or(CONTEXTS - 1), draw: Draw::new(&mut rng) }
        })
        .collect()
}
