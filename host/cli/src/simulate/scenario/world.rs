//! The hidden truth of a scenario: every resource's success probability,
//! failure kind and latency in every context at every instant, with the
//! bans, drift episodes, key revocations and rate windows that change it.

use repute_core::{FailureKind, Outcome};

use super::{
    Answer, Draw, Kind, Windows, Wire, BANNED_P, CONTEXTS, DEGRADED_SHARE, GATEWAY_TIMEOUT_MS, KEY_LIFETIME_NS, MINUTE,
    MODEL_MEDIAN_MS, MODEL_P, PROJECT_KEYS, RESOURCES, SUBNET, TIMEOUT_MS,
};
use crate::simulate::rng::Rng;

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
    /// Overload spans, `[site]` (limits).
    overloads: Vec<Vec<Span>>,
}

/// Spans up to `horizon` in time order: gaps exponential with a mean of
/// `gap` minutes, lengths uniform in `len` minutes. `each` gets every span
/// as it is drawn, and may draw what else the span needs from the same rng.
fn spans(rng: &mut Rng, horizon: u64, gap: f64, len: (f64, f64), mut each: impl FnMut(&mut Rng, Span)) {
    let minute = MINUTE as f64;
    let mut t = 0u64;
    loop {
        t += rng.exponential(gap * minute) as u64;
        if t >= horizon {
            return;
        }
        let end = t + rng.range(len.0 * minute, len.1 * minute) as u64;
        each(rng, Span { start: t, end });
        t = end;
    }
}

impl World {
    /// Builds the truth up to `horizon` ns; the schedule is drawn in time order,
    /// so a longer run extends, never changes, the one of a shorter run.
    pub fn new(kind: Kind, seed: u64, horizon: u64) -> World {
        let mut rng = Rng::stream(seed, kind.salt());
        if kind.keys() {
            return World::api_keys(kind, &mut rng);
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
            overloads: vec![Vec::new(); CONTEXTS],
        };
        match kind {
            Kind::Steady | Kind::ApiKeys | Kind::Projects => {}
            Kind::Limits => {
                for site in 0..CONTEXTS {
                    spans(&mut rng, horizon, 15.0, (1.0, 2.0), |_, span| world.overloads[site].push(span));
                }
            }
            Kind::Drift => {
                for r in 0..RESOURCES {
                    spans(&mut rng, horizon, 20.0, (3.0, 10.0), |rng, span| {
                        world.episodes[r].push(Episode { span, floor: rng.range(0.05, 0.4) });
                    });
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
                    spans(&mut rng, horizon, 10.0, (1.0, 4.0), |rng, span| {
                        let subnet = rng.below(RESOURCES / SUBNET);
                        for r in subnet * SUBNET..(subnet + 1) * SUBNET {
                            world.bans[site][r].push(span);
                        }
                    });
                }
            }
        }
        world
    }

    /// The api-keys truth; a key's revocation time is drawn with its other
    /// traits, so it does not depend on the horizon.
    fn api_keys(kind: Kind, rng: &mut Rng) -> World {
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
            kind,
            base,
            median_ms,
            episodes: vec![Vec::new(); RESOURCES],
            bans: vec![vec![Vec::new(); RESOURCES]; CONTEXTS],
            revoked_at,
            overloads: vec![Vec::new(); CONTEXTS],
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
        match self.kind {
            Kind::ApiKeys | Kind::Projects => self.api_answer(r, site, t, draw, windows),
            Kind::Limits => self.site_answer(r, site, t, draw, windows),
            _ => self.proxy_answer(r, site, t, draw),
        }
    }

    /// A site that counts (limits): its own ban, its slice, its overload,
    /// then the proxy as in steady.
    fn site_answer(&self, r: usize, site: usize, t: u64, draw: &Draw, windows: &mut Windows) -> Answer {
        let failure = |kind, latency_ms, retry_after, status| Answer {
            outcome: Outcome::Failure { kind, latency_ms, retry_after },
            wire: Wire::Status(status),
        };
        if windows.escalated(r, site, t) {
            return failure(FailureKind::Blocked, 50.0 + 250.0 * draw.kind, None, 403);
        }
        if let Err(wait) = windows.take_slice(r, site, t) {
            let ban = 2 * MINUTE + (8.0 * MINUTE as f64 * draw.kind) as u64;
            windows.refuse(r, site, t, ban);
            return failure(FailureKind::RateLimited, 10.0 + 40.0 * draw.kind, Some(wait), 429);
        }
        if draw.kind < 0.5 && self.overloads[site].iter().any(|s| s.contains(t)) {
            return failure(FailureKind::ConnectionReset, 20.0 + 560.0 * draw.kind, None, 503);
        }
        self.proxy_answer(r, site, t, draw)
    }

    /// A proxy's answer on a site that counts nothing.
    fn proxy_answer(&self, r: usize, site: usize, t: u64, draw: &Draw) -> Answer {
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
        let room = if self.kind == Kind::Projects { windows.project_room(r, t) } else { windows.room(r, model, t) };
        if let Err(wait) = room {
            return failure(FailureKind::RateLimited, 20.0 + 60.0 * draw.kind, Some(wait), 429);
        }
        match self.kind {
            Kind::Projects => windows.projects[r / PROJECT_KEYS].push_back(t),
            _ => windows.accepted[r * CONTEXTS + model].push_back(t),
        }
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
    use super::super::*;
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

    #[test]
    fn a_site_answers_past_its_slice_with_whole_seconds_to_the_slice_end() {
        let w = World::new(Kind::Limits, 1, MINUTE);
        let mut windows = Windows::new();
        // shop: 2 per 5 s slice. Two at 5.2 s and 6 s, a third at 7.5 s waits to 10 s.
        let at = |ms: u64| ms * SECOND / 1000;
        for t in [at(5200), at(6000)] {
            assert!(windows.site_admits(3, 0, t));
            assert!(w.answer(3, 0, t, &OK, &mut windows).outcome.is_success());
        }
        assert!(!windows.site_admits(3, 0, at(7500)));
        assert_eq!(
            w.answer(3, 0, at(7500), &OK, &mut windows),
            Answer {
                outcome: Outcome::failure_retry_after(FailureKind::RateLimited, 10.0, 3 * SECOND).unwrap(),
                wire: Wire::Status(429)
            }
        );
        // Another proxy, another site and the next slice have their own counts.
        assert!(w.answer(4, 0, at(7500), &OK, &mut windows).outcome.is_success());
        assert!(w.answer(3, 1, at(7500), &OK, &mut windows).outcome.is_success());
        assert!(w.answer(3, 0, at(10_000), &OK, &mut windows).outcome.is_success());
    }

    #[test]
    fn three_429s_within_a_minute_get_a_proxy_banned_on_that_site() {
        let w = World::new(Kind::Limits, 1, MINUTE);
        let mut windows = Windows::new();
        let ban_draw = Draw { u: 0.0, kind: 0.5, z: 0.0 };
        // search: 1 per 10 s. Each slice: one through, one refused.
        for slice in 0..3u64 {
            let t = slice * 10 * SECOND;
            assert!(w.answer(7, 3, t, &OK, &mut windows).outcome.is_success());
            assert_eq!(w.answer(7, 3, t + 1, &ban_draw, &mut windows).wire, Wire::Status(429));
        }
        // The third 429 (at 20 s) bans it for 2 + 8 × 0.5 = 6 min, from then.
        let third = 20 * SECOND + 1;
        for t in [third, third + 6 * MINUTE - 1] {
            let a = w.answer(7, 3, t, &OK, &mut windows);
            assert_eq!((a.outcome.kind(), a.wire), (Some(FailureKind::Blocked), Wire::Status(403)), "at {t}");
            assert!(!windows.site_admits(7, 3, t));
        }
        assert!(w.answer(7, 3, third + 6 * MINUTE, &OK, &mut windows).outcome.is_success());
        assert!(w.answer(7, 0, third, &OK, &mut windows).outcome.is_success(), "banned on search only");
    }

    #[test]
    fn an_overloaded_site_answers_half_its_requests_with_503() {
        let w = World::new(Kind::Limits, 1, 6 * 3600 * SECOND);
        let (site, span) = (0..CONTEXTS)
            .flat_map(|s| w.overloads[s].iter().map(move |span| (s, *span)))
            .next()
            .expect("six hours hold an overload");
        let len = span.end - span.start;
        assert!((MINUTE..=2 * MINUTE).contains(&len), "{len}");
        let mut windows = Windows::new();
        let answer = |k: f64, r: usize, windows: &mut Windows| {
            w.answer(r, site, span.start, &Draw { u: 0.0, kind: k, z: 0.0 }, windows)
        };
        let overloaded = answer(0.25, 0, &mut windows);
        assert_eq!(overloaded.wire, Wire::Status(503));
        assert_eq!(overloaded.outcome.kind(), Some(FailureKind::ConnectionReset));
        assert!(answer(0.5, 1, &mut windows).outcome.is_success());
        assert!(w.answer(2, site, span.end, &Draw { u: 0.0, kind: 0.25, z: 0.0 }, &mut windows).outcome.is_success());
    }

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
