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
//! The api-keys scenario has its own truth (see [`Kind::ApiKeys`]): the same
//! arrivals and shares, over 20 keys and 4 models instead of proxies and sites.

use std::collections::VecDeque;
use std::fmt;

use repute_core::{FailureKind, Outcome, SECOND};

use super::rng::Rng;

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
}

impl Kind {
    pub const ALL: [Kind; 5] = [Kind::Steady, Kind::Drift, Kind::Context, Kind::Bursts, Kind::ApiKeys];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Steady => "steady",
            Kind::Drift => "drift",
            Kind::Context => "context",
            Kind::Bursts => "bursts",
            Kind::ApiKeys => "api-keys",
        }
    }

    fn salt(self) -> u64 {
        match self {
            Kind::Steady => 1,
            Kind::Drift => 2,
            Kind::Context => 3,
            Kind::Bursts => 4,
            Kind::ApiKeys => 5,
        }
    }

    /// The context names requests are for.
    pub fn contexts(self) -> [&'static str; CONTEXTS] {
        match self {
            Kind::ApiKeys => MODELS,
            _ => SITES,
        }
    }

    /// The name of resource `r`: `r00`.. for proxies, `k00`.. for keys.
    pub fn resource_name(self, r: usize) -> String {
        let prefix = if self == Kind::ApiKeys { 'k' } else { 'r' };
        format!("{prefix}{r:02}")
    }

    /// The resource kind and the plural nouns of resources and contexts.
    pub fn nouns(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Kind::ApiKeys => ("key", "keys", "models"),
            _ => ("proxy", "proxies", "sites"),
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

/// The provider's per-(key, model) request log for the rpm limit: it depends
/// on what a strategy chose, so every run keeps its own.
#[derive(Debug, Clone, Default)]
pub struct Windows {
    /// Start times of the accepted requests of the last 60 s, `[resource * CONTEXTS + context]`, oldest first.
    accepted: Vec<VecDeque<u64>>,
}

impl Windows {
    pub fn new() -> Windows {
        Windows { accepted: vec![VecDeque::new(); RESOURCES * CONTEXTS] }
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

    /// Whether key `r` may make a request for `ctx` at `t` (what the oracle knows).
    pub fn has_room(&self, r: usize, ctx: usize, t: u64) -> bool {
        self.accepted[r * CONTEXTS + ctx].iter().filter(|&&at| at + MINUTE > t).count() < RPM_LIMIT
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

/// A stretch of time `[start, end)`.
#[derive(Debug, Clone, Copy)]
struct Span {
    start: u64,
    end: u64,
}

impl Span {
    fn contains(self, t: u64) -> bool {
        self.start <= t && t < self.end
    }
}

/// A degradation episode of one proxy (drift).
#[derive(Debug, Clone, Copy)]
struct Episode {
    span: Span,
    floor: f64,
}

impl Episode {
    /// How far down the episode is at `t`: 0 outside, 1 at the bottom.
    fn depth(&self, t: u64) -> f64 {
        if !self.span.contains(t) {
            return 0.0;
        }
        let len = (self.span.end - self.span.start) as f64;
        let x = (t - self.span.start) as f64 / len;
        (x / 0.25).min((1.0 - x) / 0.25).min(1.0)
    }
}

/// The hidden truth of one scenario.
#[derive(Debug, Clone)]
pub struct World {
    kind: Kind,
    /// Base success probability, `[resource][context]`.
    base: Vec<[f64; CONTEXTS]>,
    /// Median latency of a success, `[resource][context]`.
    median_ms: Vec<[f64; CONTEXTS]>,
    episodes: Vec<Vec<Episode>>,
    /// Ban spans, `[site][resource]`.
    bans: Vec<Vec<Vec<Span>>>,
    /// When each key is revoked (api-keys); `u64::MAX` for never.
    revoked_at: Vec<u64>,
}

impl World {
    /// Builds the truth up to `horizon` ns; the schedule is drawn in time order,
    /// so a longer run extends, never changes, the one of a shorter run.
    pub fn new(kind: Kind, seed: u64, horizon: u64) -> World {
        let mut rng = Rng::stream(seed, kind.salt());
        if kind == Kind::ApiKeys {
            return World::api_keys(&mut rng);
        }
        let mut tiers: Vec<(f64, f64)> = [(6, 0.95, 0.99), (10, 0.80, 0.93), (4, 0.40, 0.70)]
            .iter()
            .flat_map(|&(n, lo, hi)| std::iter::repeat_n((lo, hi), n))
            .collect();
        for i in (1..tiers.len()).rev() {
            tiers.swap(i, rng.below(i + 1));
        }
        let mut base = Vec::with_capacity(RESOURCES);
        let mut median_ms = Vec::with_capacity(RESOURCES);
        for &(lo, hi) in &tiers {
            let q = rng.range(lo, hi);
            base.push(std::array::from_fn(|_| (q + rng.range(-0.03, 0.03)).clamp(0.01, 0.995)));
            median_ms.push([rng.range(80.0, 900.0); CONTEXTS]);
        }
        let mut world = World {
            kind,
            base,
            median_ms,
            episodes: vec![Vec::new(); RESOURCES],
            bans: vec![vec![Vec::new(); RESOURCES]; CONTEXTS],
            revoked_at: vec![u64::MAX; RESOURCES],
        };
        match kind {
            Kind::Steady | Kind::ApiKeys => {}
            Kind::Drift => {
                for r in 0..RESOURCES {
                    let mut t = 0u64;
                    loop {
                        t += rng.exponential(20.0 * MINUTE as f64) as u64;
                        if t >= horizon {
                            break;
                        }
                        let end = t + rng.range(3.0 * MINUTE as f64, 10.0 * MINUTE as f64) as u64;
                        world.episodes[r].push(Episode { span: Span { start: t, end }, floor: rng.range(0.05, 0.4) });
                        t = end;
                    }
                }
            }
            Kind::Context => {
                let mut rank: Vec<usize> = (0..RESOURCES).collect();
                let quality = |r: usize| world.base[r].iter().sum::<f64>();
                rank.sort_by(|&a, &b| quality(b).total_cmp(&quality(a)));
                let forever = Span { start: 0, end: u64::MAX };
                for (i, &r) in rank.iter().enumerate() {
                    let shop = [0, 2, 4].contains(&i) || (i >= 6 && rng.unit() < 0.4);
                    let search = [1, 3].contains(&i) || (i >= 6 && rng.unit() < 0.25);
                    if shop {
                        world.bans[0][r].push(forever);
                    }
                    if search {
                        world.bans[3][r].push(forever);
                    }
                }
            }
            Kind::Bursts => {
                for site in 0..CONTEXTS {
                    let mut t = 0u64;
                    loop {
                        t += rng.exponential(10.0 * MINUTE as f64) as u64;
                        if t >= horizon {
                            break;
                        }
                        let end = t + rng.range(MINUTE as f64, 4.0 * MINUTE as f64) as u64;
                        let subnet = rng.below(RESOURCES / SUBNET);
                        for r in subnet * SUBNET..(subnet + 1) * SUBNET {
                            world.bans[site][r].push(Span { start: t, end });
                        }
                        t = end;
                    }
                }
            }
        }
        world
    }

    /// The api-keys truth; a key's revocation time is drawn with its other
    /// traits, so it does not depend on the horizon.
    fn api_keys(rng: &mut Rng) -> World {
        let mut base = Vec::with_capacity(RESOURCES);
        let mut median_ms = Vec::with_capacity(RESOURCES);
        let mut revoked_at = Vec::with_capacity(RESOURCES);
        for _ in 0..RESOURCES {
            base.push(std::array::from_fn(|m| {
                if rng.unit() < DEGRADED_SHARE {
                    rng.range(0.55, 0.85)
                } else {
                    (MODEL_P[m] + rng.range(-0.015, 0.015)).min(0.999)
                }
            }));
            let region = rng.range(0.8, 1.25);
            median_ms.push(MODEL_MEDIAN_MS.map(|m| m * region));
            revoked_at.push(rng.exponential(KEY_LIFETIME_NS) as u64);
        }
        World {
            kind: Kind::ApiKeys,
            base,
            median_ms,
            episodes: vec![Vec::new(); RESOURCES],
            bans: vec![vec![Vec::new(); RESOURCES]; CONTEXTS],
            revoked_at,
        }
    }

    fn revoked(&self, r: usize, t: u64) -> bool {
        t >= self.revoked_at[r]
    }

    fn banned(&self, r: usize, site: usize, t: u64) -> bool {
        self.bans[site][r].iter().any(|s| s.contains(t))
    }

    fn depth(&self, r: usize, t: u64) -> (f64, f64) {
        self.episodes[r].iter().find(|e| e.span.contains(t)).map_or((0.0, 0.0), |e| (e.depth(t), e.floor))
    }

    /// The true success probability of resource `r` in context `site` at
    /// `t`, rate limits aside: what the oracle knows.
    pub fn p(&self, r: usize, site: usize, t: u64) -> f64 {
        if self.revoked(r, t) {
            return 0.0;
        }
        if self.banned(r, site, t) {
            return BANNED_P;
        }
        let (d, floor) = self.depth(r, t);
        self.base[r][site] * (1.0 - d) + floor * d
    }

    /// What happens when resource `r` serves a request for `site` at `t`;
    /// `windows` is the run's rpm log (api-keys), which an accepted request joins.
    pub fn answer(&self, r: usize, site: usize, t: u64, draw: &Draw, windows: &mut Windows) -> Answer {
        if self.kind == Kind::ApiKeys {
            return self.api_answer(r, site, t, draw, windows);
        }
        if draw.u < self.p(r, site, t) {
            let (d, _) = self.depth(r, t);
            let median = self.median_ms[r][site] * (1.0 + 2.0 * d);
            let latency_ms = (median * libm::exp(0.35 * draw.z)).min(TIMEOUT_MS - 1.0);
            return Answer { outcome: Outcome::Success { latency_ms }, wire: Wire::Status(200) };
        }
        // `draw.kind` picks the kind; its position inside the kind's band spreads the latency.
        let (kind, latency_ms, wire) = if self.banned(r, site, t) {
            (FailureKind::Blocked, 50.0 + 250.0 * draw.kind, Wire::Status(403))
        } else if draw.kind < 0.40 {
            (FailureKind::Timeout, TIMEOUT_MS, Wire::Timeout)
        } else if draw.kind < 0.75 {
            (FailureKind::ConnectionReset, 20.0 + 280.0 * (draw.kind - 0.40) / 0.35, Wire::Reset)
        } else {
            (FailureKind::Slow, 2000.0 + 1000.0 * (draw.kind - 0.75) / 0.25, Wire::Status(200))
        };
        Answer { outcome: Outcome::Failure { kind, latency_ms, retry_after: None }, wire }
    }

    fn api_answer(&self, r: usize, model: usize, t: u64, draw: &Draw, windows: &mut Windows) -> Answer {
        let failure = |kind, latency_ms, retry_after, status| Answer {
            outcome: Outcome::Failure { kind, latency_ms, retry_after },
            wire: Wire::Status(status),
        };
        if self.revoked(r, t) {
            return failure(FailureKind::AuthFailed, 40.0 + 80.0 * draw.kind, None, 401);
        }
        if let Err(wait) = windows.room(r, model, t) {
            return failure(FailureKind::RateLimited, 20.0 + 60.0 * draw.kind, Some(wait), 429);
        }
        windows.accepted[r * CONTEXTS + model].push_back(t);
        if draw.u < self.p(r, model, t) {
            let latency_ms = (self.median_ms[r][model] * libm::exp(0.35 * draw.z)).min(GATEWAY_TIMEOUT_MS - 1.0);
            return Answer { outcome: Outcome::Success { latency_ms }, wire: Wire::Status(200) };
        }
        if draw.kind < 0.7 {
            failure(FailureKind::ConnectionReset, 150.0 + 750.0 * draw.kind / 0.7, None, 500)
        } else {
            failure(FailureKind::Timeout, GATEWAY_TIMEOUT_MS, None, 504)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiers_are_six_premium_ten_standard_four_poor() {
        let w = World::new(Kind::Steady, 1, MINUTE);
        let mean = |r: usize| w.base[r].iter().sum::<f64>() / 4.0;
        let premium = (0..RESOURCES).filter(|&r| mean(r) >= 0.92).count();
        let poor = (0..RESOURCES).filter(|&r| mean(r) <= 0.73).count();
        assert_eq!((premium, poor), (6, 4));
    }

    #[test]
    fn context_bans_the_best_three_on_shop_and_nothing_on_news_or_api() {
        let w = World::new(Kind::Context, 9, MINUTE);
        let mut rank: Vec<usize> = (0..RESOURCES).collect();
        rank.sort_by(|&a, &b| w.base[b].iter().sum::<f64>().total_cmp(&w.base[a].iter().sum::<f64>()));
        for (i, &r) in rank.iter().take(5).enumerate() {
            assert_eq!(w.p(r, 0, 0) == BANNED_P, i % 2 == 0, "rank {i} on shop");
            assert_eq!(w.p(r, 3, 0) == BANNED_P, i % 2 == 1, "rank {i} on search");
        }
        assert!((0..RESOURCES).all(|r| w.p(r, 1, 0) > BANNED_P && w.p(r, 2, 0) > BANNED_P));
        let draw = Draw { u: 0.5, kind: 0.0, z: 0.0 };
        assert_eq!(
            w.answer(rank[0], 0, 0, &draw, &mut Windows::new()),
            Answer {
                outcome: Outcome::Failure { kind: FailureKind::Blocked, latency_ms: 50.0, retry_after: None },
                wire: Wire::Status(403)
            }
        );
    }

    #[test]
    fn drift_episodes_ramp_down_and_back() {
        let e = Episode { span: Span { start: 0, end: 100 }, floor: 0.1 };
        let expected = [(0, 0.0), (10, 0.4), (25, 1.0), (50, 1.0), (90, 0.4), (100, 0.0)];
        for (t, depth) in expected {
            assert!((e.depth(t) - depth).abs() < 1e-12, "depth at {t}: {}", e.depth(t));
        }
    }

    #[test]
    fn failure_kinds_follow_the_draw() {
        let w = World::new(Kind::Steady, 1, MINUTE);
        let kind = |k: f64| match w.answer(0, 1, 0, &Draw { u: 0.999, kind: k, z: 0.0 }, &mut Windows::new()) {
            Answer { outcome: Outcome::Failure { kind, latency_ms, .. }, wire } => (kind, latency_ms, wire),
            other => panic!("expected a failure, got {other:?}"),
        };
        assert_eq!(kind(0.1), (FailureKind::Timeout, 3000.0, Wire::Timeout));
        assert_eq!(kind(0.40), (FailureKind::ConnectionReset, 20.0, Wire::Reset));
        assert_eq!(kind(0.75), (FailureKind::Slow, 2000.0, Wire::Status(200)));
    }

    const OK: Draw = Draw { u: 0.0, kind: 0.0, z: 0.0 };

    /// A key of seed 1's api-keys world that lives past `t`.
    fn live_key(w: &World, t: u64) -> usize {
        (0..RESOURCES).find(|&r| w.revoked_at[r] > t).expect("some key outlives the first hour")
    }

    #[test]
    fn the_rpm_window_answers_429_with_the_exact_wait_until_it_frees() {
        let w = World::new(Kind::ApiKeys, 1, MINUTE);
        let r = live_key(&w, 2 * MINUTE);
        let mut windows = Windows::new();
        // 20 accepted requests for chat-large, one every 2 s from t = 1 s.
        for i in 0..RPM_LIMIT as u64 {
            let a = w.answer(r, 0, (1 + 2 * i) * SECOND, &OK, &mut windows);
            assert!(a.outcome.is_success(), "request {i}: {a:?}");
        }
        // The 21st at 45 s waits until the first leaves the window, at 61 s.
        let limited = w.answer(r, 0, 45 * SECOND, &OK, &mut windows);
        assert_eq!(
            limited,
            Answer {
                outcome: Outcome::failure_retry_after(FailureKind::RateLimited, 20.0, 16 * SECOND).unwrap(),
                wire: Wire::Status(429)
            }
        );
        // A 429 is not counted, the other models have their own windows, and at 61 s there is room again.
        assert_eq!(w.answer(r, 0, 61 * SECOND - 1, &OK, &mut windows).wire, Wire::Status(429));
        assert!(w.answer(r, 1, 45 * SECOND, &OK, &mut windows).outcome.is_success());
        assert!(windows.has_room(r, 0, 61 * SECOND));
        assert!(w.answer(r, 0, 61 * SECOND, &OK, &mut windows).outcome.is_success());
        let again = w.answer(r, 0, 62 * SECOND, &OK, &mut windows);
        assert_eq!(again.outcome, Outcome::failure_retry_after(FailureKind::RateLimited, 20.0, SECOND).unwrap());
    }

    #[test]
    fn a_revoked_key_answers_401_forever() {
        let w = World::new(Kind::ApiKeys, 1, MINUTE);
        let (r, at) = (0..RESOURCES).map(|r| (r, w.revoked_at[r])).min_by_key(|&(_, at)| at).unwrap();
        let mut windows = Windows::new();
        assert_ne!(w.answer(r, 2, at - 1, &OK, &mut windows).wire, Wire::Status(401));
        for t in [at, at + 1, at + 3600 * SECOND, u64::MAX - 1] {
            for model in 0..CONTEXTS {
                let a = w.answer(r, model, t, &OK, &mut windows);
                assert_eq!(
                    a,
                    Answer {
                        outcome: Outcome::Failure {
                            kind: FailureKind::AuthFailed,
                            latency_ms: 40.0,
                            retry_after: None
                        },
                        wire: Wire::Status(401)
                    }
                );
            }
            assert_eq!(w.p(r, 0, t), 0.0);
        }
    }

    #[test]
    fn api_keys_fail_with_500_or_504_and_a_quarter_of_keys_die_in_an_hour() {
        let w = World::new(Kind::ApiKeys, 1, MINUTE);
        let r = live_key(&w, MINUTE);
        let fail = |k: f64| w.answer(r, 0, 0, &Draw { u: 0.9999, kind: k, z: 0.0 }, &mut Windows::new());
        assert_eq!(fail(0.0).outcome.kind(), Some(FailureKind::ConnectionReset));
        assert_eq!(fail(0.0).wire, Wire::Status(500));
        assert_eq!((fail(0.7).outcome.kind(), fail(0.7).wire), (Some(FailureKind::Timeout), Wire::Status(504)));
        assert_eq!(fail(0.7).outcome.latency_ms(), GATEWAY_TIMEOUT_MS);
        let dead: usize = (1..=8)
            .map(|seed| World::new(Kind::ApiKeys, seed, MINUTE))
            .map(|w| w.revoked_at.iter().filter(|&&at| at < 3600 * SECOND).count())
            .sum();
        assert!((20..=60).contains(&dead), "{dead} of 160 keys revoked within an hour over 8 seeds");
    }
}
