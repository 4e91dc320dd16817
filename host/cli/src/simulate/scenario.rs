//! The built-in scenarios: a hidden truth (success probability, failure kind
//! and latency of every resource on every site, at every instant) that the
//! strategies must discover from outcomes alone, and the request stream that
//! every strategy faces identically.
//!
//! Shared by all scenarios ("the pool"): 20 proxies `r00`..`r19`, one permit
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

use std::fmt;

use repute_core::{FailureKind, Outcome, SECOND};

use super::rng::Rng;

pub const RESOURCES: usize = 20;
pub const SITES: [&str; 4] = ["shop.example", "news.example", "api.example", "search.example"];
const SITE_SHARE: [f64; 4] = [0.4, 0.3, 0.2, 0.1];
const MEAN_ARRIVAL_NS: f64 = 0.2 * SECOND as f64;
const TIMEOUT_MS: f64 = 3000.0;
const BANNED_P: f64 = 0.03;
const MINUTE: u64 = 60 * SECOND;
/// Proxies per subnet, the unit a ban wave takes out (bursts).
const SUBNET: usize = 5;

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
}

impl Kind {
    pub const ALL: [Kind; 4] = [Kind::Steady, Kind::Drift, Kind::Context, Kind::Bursts];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Steady => "steady",
            Kind::Drift => "drift",
            Kind::Context => "context",
            Kind::Bursts => "bursts",
        }
    }

    fn salt(self) -> u64 {
        match self {
            Kind::Steady => 1,
            Kind::Drift => 2,
            Kind::Context => 3,
            Kind::Bursts => 4,
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
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

/// The request stream of a scenario: Poisson arrivals, sites by traffic share.
pub fn requests(kind: Kind, n: u32, seed: u64) -> Vec<Request> {
    let mut rng = Rng::stream(seed, 100 + kind.salt());
    let mut at = 0.0;
    (0..n)
        .map(|_| {
            at += rng.exponential(MEAN_ARRIVAL_NS);
            let x = rng.unit();
            let mut acc = 0.0;
            let site = SITE_SHARE.iter().position(|s| {
                acc += s;
                x < acc
            });
            Request { at: at as u64, site: site.unwrap_or(SITES.len() - 1), draw: Draw::new(&mut rng) }
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
    /// Base success probability, `[resource][site]`.
    base: Vec<[f64; SITES.len()]>,
    median_ms: Vec<f64>,
    episodes: Vec<Vec<Episode>>,
    /// Ban spans, `[site][resource]`.
    bans: Vec<Vec<Vec<Span>>>,
}

impl World {
    /// Builds the truth up to `horizon` ns; the schedule is drawn in time order,
    /// so a longer run extends, never changes, the one of a shorter run.
    pub fn new(kind: Kind, seed: u64, horizon: u64) -> World {
        let mut rng = Rng::stream(seed, kind.salt());
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
            median_ms.push(rng.range(80.0, 900.0));
        }
        let mut world = World {
            base,
            median_ms,
            episodes: vec![Vec::new(); RESOURCES],
            bans: vec![vec![Vec::new(); RESOURCES]; 4],
        };
        match kind {
            Kind::Steady => {}
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
                for site in 0..SITES.len() {
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

    fn banned(&self, r: usize, site: usize, t: u64) -> bool {
        self.bans[site][r].iter().any(|s| s.contains(t))
    }

    fn depth(&self, r: usize, t: u64) -> (f64, f64) {
        self.episodes[r].iter().find(|e| e.span.contains(t)).map_or((0.0, 0.0), |e| (e.depth(t), e.floor))
    }

    /// The true success probability of proxy `r` on `site` at `t`: what the oracle knows.
    pub fn p(&self, r: usize, site: usize, t: u64) -> f64 {
        if self.banned(r, site, t) {
            return BANNED_P;
        }
        let (d, floor) = self.depth(r, t);
        self.base[r][site] * (1.0 - d) + floor * d
    }

    /// What happens when proxy `r` serves a request on `site` at `t`.
    pub fn outcome(&self, r: usize, site: usize, t: u64, draw: &Draw) -> Outcome {
        if draw.u < self.p(r, site, t) {
            let (d, _) = self.depth(r, t);
            let median = self.median_ms[r] * (1.0 + 2.0 * d);
            let latency_ms = (median * libm::exp(0.35 * draw.z)).min(TIMEOUT_MS - 1.0);
            return Outcome::Success { latency_ms };
        }
        // `draw.kind` picks the kind; its position inside the kind's band spreads the latency.
        let (kind, latency_ms) = if self.banned(r, site, t) {
            (FailureKind::Blocked, 50.0 + 250.0 * draw.kind)
        } else if draw.kind < 0.40 {
            (FailureKind::Timeout, TIMEOUT_MS)
        } else if draw.kind < 0.75 {
            (FailureKind::ConnectionReset, 20.0 + 280.0 * (draw.kind - 0.40) / 0.35)
        } else {
            (FailureKind::Slow, 2000.0 + 1000.0 * (draw.kind - 0.75) / 0.25)
        };
        Outcome::Failure { kind, latency_ms, retry_after: None }
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
            w.outcome(rank[0], 0, 0, &draw),
            Outcome::Failure { kind: FailureKind::Blocked, latency_ms: 50.0, retry_after: None }
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
        let kind = |k: f64| match w.outcome(0, 1, 0, &Draw { u: 0.999, kind: k, z: 0.0 }) {
            Outcome::Failure { kind, latency_ms, .. } => (kind, latency_ms),
            other => panic!("expected a failure, got {other:?}"),
        };
        assert_eq!(kind(0.1), (FailureKind::Timeout, 3000.0));
        assert_eq!(kind(0.40), (FailureKind::ConnectionReset, 20.0));
        assert_eq!(kind(0.75), (FailureKind::Slow, 2000.0));
    }
}
