//! Usage limits as a lease authority counts them: the grants of one
//! resource in the last minute and the last day, of each of its contexts,
//! and of each group its resources share, across every pool the authority
//! serves, and the rule a claim is judged by. The in-process authorities
//! (memory, and SQLite under its tables) run this code; PostgreSQL and
//! Redis run the same rule in the store, in the statement or script of the
//! grant.
//!
//! A claim counts in the scopes of its resource and of its groups, judged
//! in this order, the first refusal answering: the resource's own
//! (`RESOURCE_SCOPE`, judged by its limits when they count grants), its
//! context's (judged by `limits.per_context`, when the claim names a
//! context; a wait answers `ContextLimited`), then each of the claim's
//! groups in the claim's order (judged by the group's paced limits, then
//! its `concurrency`; a wait answers `GroupLimited` with the group's index).
//! A group's usage is the tenant's, keyed by the group's name alone: every
//! member resource counts in it. A grant admitted by every scope is
//! counted in each of them in the same step.
//!
//! For a grant claiming `{limits, cost}` at `now` of a permit that is free,
//! the core's rule (`repute_core::usage::judge`) answers: `max_uses` spent
//! answers `Limited(None)`; else the grant waits for the earliest `t >= now`
//! at which `min_interval` has passed since the newest grant, the minute
//! holds fewer than `rpm` grants and `cost` more tokens fit under `tpm`,
//! and the day likewise under `rpd` and `tpd` (grants leave a window its
//! span after they were made), answering `Limited(Some(t - now))` while
//! `t > now`. A cost over `tpm` or `tpd` can never fit: that grant is
//! refused as `Held`, for this acquire only, since any smaller cost may
//! still be granted. The SQL and Lua forms are held to the core's table of
//! cases (`repute_core::usage::cases`) by the host's tests.
//!
//! How each window is kept: a resource's (and a context's) minute holds
//! each grant, so a reconcile finds it by permit and token; a day, and a
//! group's minute, are the core's buckets (`Buckets`: one entry per 1024th
//! of the span, never admitting more than a limit, at most 1026 entries),
//! and a reconcile finds a grant's entry by the grant's time. So the
//! authority remembers each permit's newest claimed grant (`Claimed`): its
//! token, time and the group windows it counted in; bounded by permits, not
//! by grants.
//!
//! A group's `concurrency` counts the leases granted with the group that
//! are live at the authority: the newest token of their permit, not
//! expired, not revoked. The authority keeps one entry per permit of the
//! group's members (the newest grant's), and drops those that ended as it
//! counts; a revoke frees a slot at once, an extension keeps it.

use std::collections::{HashMap, VecDeque};

use repute_core::usage::{self, Buckets, Counted, DayWindow, Entry, MinuteWindow, Slice, Used, Verdict};
use repute_core::{Claim, GrantAnswer, Limits, Window, WINDOW};

/// The scope of a resource's own usage; a context's scope is its name
/// (never empty).
pub(crate) const RESOURCE_SCOPE: &str = "";

/// The scopes a claim counts in, with the limits each is judged by: the
/// resource's first.
pub(crate) fn scopes(claim: &Claim) -> impl Iterator<Item = (&str, Limits)> {
    let resource = claim.limits.counted().then_some((RESOURCE_SCOPE, claim.limits));
    let context = claim.context.as_ref().map(|c| (c.as_str(), claim.limits.per_context.as_limits()));
    resource.into_iter().chain(context)
}

/// A scope's refusal as the grant's answer: a context's wait is its own.
pub(crate) fn scoped(scope: &str, refused: GrantAnswer) -> GrantAnswer {
    match refused {
        GrantAnswer::Limited(Some(wait)) if scope != RESOURCE_SCOPE => GrantAnswer::ContextLimited(wait),
        other => other,
    }
}

/// A group's refusal as the grant's answer: a wait names the group by its
/// index in the claim.
pub(crate) fn grouped(index: u32, refused: GrantAnswer) -> GrantAnswer {
    match refused {
        GrantAnswer::Limited(Some(wait)) => GrantAnswer::GroupLimited(index, wait),
        other => other,
    }
}

/// The rule's verdict at `now` as an authority answers it.
fn answer(verdict: Verdict, now: u64) -> Option<GrantAnswer> {
    match verdict {
        Verdict::Admitted => None,
        Verdict::Until(at) => Some(GrantAnswer::Limited(Some(at - now))),
        Verdict::Spent => Some(GrantAnswer::Limited(None)),
        Verdict::Oversized => Some(GrantAnswer::Held),
    }
}

/// The entry of `window` that a grant of `cost` at `now` lands in, as
/// `Buckets::record` makes it: the newest one grown, or a new one. A store
/// writes it back before the window in memory records the grant.
pub(crate) fn landing<const SPAN: u64>(window: &Buckets<SPAN>, cost: u64, now: u64) -> Entry {
    match window.entries().last() {
        Some(e) if now.saturating_sub(e.from) < Buckets::<SPAN>::BUCKET => {
            Entry { from: e.from, at: e.at.max(now), grants: e.grants + 1, tokens: e.tokens + cost }
        }
        _ => Entry { from: now, at: now, grants: 1, tokens: cost },
    }
}

/// The entry of `window` holding a grant made at `at`, if it is still in
/// the window: the first not older than the grant, if its grants began
/// no later than it (else the grant's own entry has left).
pub(crate) fn holding<const SPAN: u64>(window: &Buckets<SPAN>, at: u64) -> Option<Entry> {
    window.entries().find(|e| e.at >= at).filter(|e| e.from <= at).copied()
}

/// The grant made at `at` used `used` tokens, not the `reserved` ones, in
/// the entry of `window` holding it; nothing once that entry left.
fn reconcile_at<const SPAN: u64>(window: &mut Buckets<SPAN>, at: u64, reserved: u64, used: u64) {
    if holding(window, at).is_some() {
        window.reconcile(at, reserved, used);
    }
}

/// One grant in the window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Grant {
    pub at: u64,
    /// Tokens it counts against `tpm`: its cost, or what it reconciled to.
    pub cost: u64,
    pub permit: u32,
    pub token: u64,
}

/// What one resource has used of its limits at the authority.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Usage {
    /// Grants of the last `WINDOW`, oldest first: only those an `rpm` or
    /// `tpm` counts, so a resource limited by `min_interval` or `max_uses`
    /// alone keeps none.
    pub window: VecDeque<Grant>,
    /// The sum of the window's costs.
    pub tokens: u64,
    /// When the newest grant was made.
    pub last: Option<u64>,
    /// Grants ever.
    pub uses: u64,
    /// Grants of the last day that an `rpd` or `tpd` counts, in buckets
    /// (a day of grants is not kept one by one).
    pub day: DayWindow,
}

/// The minute window as the rule reads it: one slice per grant.
pub(crate) struct Minute<'a>(&'a Usage);

impl Counted for Minute<'_> {
    fn grants(&self) -> u64 {
        self.0.window.len() as u64
    }

    fn tokens(&self) -> u64 {
        self.0.tokens
    }

    fn slices(&self) -> impl Iterator<Item = Slice> + '_ {
        self.0.window.iter().map(|g| Slice { at: g.at, grants: 1, tokens: g.cost })
    }
}

/// Whether a grant under `limits` joins the window.
pub(crate) fn windowed(limits: &Limits) -> bool {
    limits.rpm.is_some() || limits.tpm.is_some()
}

impl Usage {
    /// Drops the grants that left the window by `now`; returns how many.
    pub fn prune(&mut self, now: u64) -> usize {
        let mut dropped = 0;
        while let Some(g) = self.window.front().copied() {
            if g.at.saturating_add(WINDOW) > now {
                break;
            }
            self.window.pop_front();
            self.tokens -= g.cost;
            dropped += 1;
        }
        self.day.expire(now);
        dropped
    }

    /// What the window holds at `now`: the grants `prune(now)` would keep.
    pub fn window_at(&self, now: u64) -> Window {
        let kept = self.window.iter().filter(|g| g.at.saturating_add(WINDOW) > now);
        kept.fold(Window::default(), |w, g| Window { grants: w.grants + 1, tokens: w.tokens + g.cost })
    }

    /// The answer to a grant of `cost` under `limits` at `now` (pruned
    /// first) when it is refused; `None` when it may be granted. The rule
    /// is the core's; a cost over `tpm` is refused as `Held`.
    pub fn judge(&self, limits: &Limits, cost: u64, now: u64) -> Option<GrantAnswer> {
        answer(usage::judge(limits, self, cost, now), now)
    }

    /// Counts the grant of `token` on `permit` of `cost` under `limits` made at `now`.
    pub fn record(&mut self, limits: &Limits, cost: u64, permit: u32, token: u64, now: u64) {
        self.uses += 1;
        self.last = Some(self.last.map_or(now, |l| l.max(now)));
        if windowed(limits) {
            self.tokens += cost;
            self.window.push_back(Grant { at: now, cost, permit, token });
        }
        if limits.daily() {
            self.day.record(cost, now);
        }
    }

    /// The grant of `token` on `permit` used `used` tokens; false if it is
    /// no longer in the minute window. (The day's entry is reconciled by
    /// the grant's time: `ResourceUsage::reconcile`.)
    pub fn reconcile(&mut self, permit: u32, token: u64, used: u64) -> bool {
        let Some(g) = self.window.iter_mut().rev().find(|g| g.permit == permit && g.token == token) else {
            return false;
        };
        self.tokens = self.tokens - g.cost + used;
        g.cost = used;
        true
    }
}

impl Used for Usage {
    fn last(&self) -> Option<u64> {
        self.last
    }

    fn uses(&self) -> u64 {
        self.uses
    }

    fn minute(&self) -> impl Counted + '_ {
        Minute(self)
    }

    fn day(&self) -> impl Counted + '_ {
        &self.day
    }
}

/// What a group's members have used together at the authority: both
/// windows in buckets, since a group's grants are many resources'.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct GroupUsage {
    pub minute: MinuteWindow,
    pub day: DayWindow,
    /// When the newest grant was made: a group's `rpm` spaces grants.
    pub last: Option<u64>,
    pub uses: u64,
}

impl GroupUsage {
    /// Drops the grants that left either window by `now`.
    pub fn prune(&mut self, now: u64) {
        self.minute.expire(now);
        self.day.expire(now);
    }

    /// As `Usage::judge`, on the group's windows.
    pub fn judge(&self, limits: &Limits, cost: u64, now: u64) -> Option<GrantAnswer> {
        answer(usage::judge(limits, self, cost, now), now)
    }

    /// Counts a grant of `cost` under `limits` made at `now`, in the
    /// windows they count in only.
    pub fn record(&mut self, limits: &Limits, cost: u64, now: u64) {
        self.uses += 1;
        self.last = Some(self.last.map_or(now, |l| l.max(now)));
        if limits.windowed() {
            self.minute.record(cost, now);
        }
        if limits.daily() {
            self.day.record(cost, now);
        }
    }

    /// The grant made at `at` used `used` tokens, not the `reserved` ones,
    /// in the windows `counted` says it joined.
    pub fn reconcile(&mut self, counted: Counts, at: u64, reserved: u64, used: u64) {
        if counted.minute {
            reconcile_at(&mut self.minute, at, reserved, used);
        }
        if counted.day {
            reconcile_at(&mut self.day, at, reserved, used);
        }
    }
}

impl Used for GroupUsage {
    fn last(&self) -> Option<u64> {
        self.last
    }

    fn uses(&self) -> u64 {
        self.uses
    }

    fn minute(&self) -> impl Counted + '_ {
        &self.minute
    }

    fn day(&self) -> impl Counted + '_ {
        &self.day
    }
}

/// Which bucketed windows of a scope a grant joined.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    pub minute: bool,
    pub day: bool,
}

/// A permit's newest claimed grant, as its reconcile needs it: the token
/// that names it, when it was made (on the limits clock), whether the
/// resource's day counted it, and the groups whose windows did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Claimed {
    pub token: u64,
    pub at: u64,
    pub day: bool,
    pub groups: Vec<(String, Counts)>,
}

impl Claimed {
    /// The grant of `token` that `claim` made at `at`.
    pub fn new(claim: &Claim, token: u64, at: u64) -> Claimed {
        let counted = |l: &Limits| Counts { minute: l.windowed(), day: l.daily() };
        let groups = claim.groups.iter().filter(|g| g.limits.counted());
        Claimed {
            token,
            at,
            day: claim.limits.daily(),
            groups: groups.map(|g| (g.name.as_str().to_owned(), counted(&g.limits))).collect(),
        }
    }
}

/// One scope's usage at an in-process authority.
#[derive(Debug, Clone, Default)]
pub(crate) struct UsageState {
    pub usage: Usage,
    /// Read from durable storage already (as `PermitState::loaded`).
    pub loaded: bool,
}

/// What an in-process authority keeps of one resource's usage: its own
/// scope and each context's.
#[derive(Debug, Clone, Default)]
pub(crate) struct ResourceUsage {
    scopes: HashMap<String, UsageState>,
    /// Each permit's newest claimed grant.
    pub claimed: HashMap<u32, Claimed>,
}

impl ResourceUsage {
    /// The usage of `scope` (made empty on first use).
    pub fn scope(&mut self, scope: &str) -> &mut UsageState {
        if !self.scopes.contains_key(scope) {
            self.scopes.insert(scope.to_owned(), UsageState::default());
        }
        self.scopes.get_mut(scope).expect("inserted above")
    }

    /// The usage of `scope`, if it has any.
    pub fn get(&self, scope: &str) -> Option<&UsageState> {
        self.scopes.get(scope)
    }

    /// Prunes each scope of `claim` at `now` and judges the claim there;
    /// `None` when every scope admits it.
    pub fn judge(&mut self, claim: &Claim, now: u64) -> Option<GrantAnswer> {
        scopes(claim).find_map(|(scope, limits)| {
            let usage = &mut self.scope(scope).usage;
            usage.prune(now);
            usage.judge(&limits, claim.cost, now).map(|refused| scoped(scope, refused))
        })
    }

    /// Counts the grant of `token` on `permit` that `claim` made at `now`,
    /// in each of its resource's scopes, and remembers it as the permit's
    /// newest (the groups' windows are the caller's).
    pub fn record(&mut self, claim: &Claim, permit: u32, token: u64, now: u64) {
        for (scope, limits) in scopes(claim) {
            self.scope(scope).usage.record(&limits, claim.cost, permit, token, now);
        }
        self.claimed.insert(permit, Claimed::new(claim, token, now));
    }

    /// The grant of `token` on `permit` used `used` tokens, not the
    /// `reserved` ones, in the resource's scope and, given, in `context`'s:
    /// `claimed` is that grant (the permit's newest claimed one).
    pub fn reconcile(
        &mut self,
        context: Option<&str>,
        permit: u32,
        token: u64,
        claimed: Option<&Claimed>,
        reserved: u64,
        used: u64,
    ) {
        for scope in [Some(RESOURCE_SCOPE), context].into_iter().flatten() {
            if let Some(state) = self.scopes.get_mut(scope) {
                state.usage.reconcile(permit, token, used);
            }
        }
        let day = claimed.filter(|c| c.token == token && c.day);
        if let (Some(c), Some(state)) = (day, self.scopes.get_mut(RESOURCE_SCOPE)) {
            reconcile_at(&mut state.usage.day, c.at, reserved, used);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use repute_core::SECOND;

    fn claim(limits: Limits, cost: u64) -> Claim {
        Claim { limits, cost, context: None, groups: Vec::new() }
    }

    /// Judges and, when admitted, records a grant; returns the answer.
    fn ask(u: &mut Usage, c: &Claim, now: u64) -> GrantAnswer {
        u.prune(now);
        match u.judge(&c.limits, c.cost, now) {
            Some(refused) => refused,
            None => {
                let token = u.uses + 1;
                u.record(&c.limits, c.cost, 0, token, now);
                GrantAnswer::Granted(token)
            }
        }
    }

    #[test]
    fn tpm_counts_costs_reconciled_to_use() {
        let c = claim(Limits { tpm: Some(100), ..Limits::default() }, 60);
        let mut u = Usage::default();
        assert_eq!(ask(&mut u, &c, 0), GrantAnswer::Granted(1));
        assert!(u.reconcile(0, 1, 20));
        assert_eq!(u.tokens, 20);
        u.prune(WINDOW + SECOND);
        assert_eq!((u.window.len(), u.tokens), (0, 0));
        assert!(!u.reconcile(0, 1, 5), "a grant that left the window is not reconciled");
    }

    /// The core's table of cases (built with `testing`, which turns on the
    /// core's `workload`), against the window the in-process authorities keep.
    #[cfg(feature = "testing")]
    mod cases {
        use super::*;
        use repute_core::usage::cases::{Step, CASES};

        /// The answer the authority gives for the rule's `verdict` on a claim
        /// asked at `now`, given the token a grant would get.
        fn answer(verdict: Verdict, now: u64, token: u64) -> GrantAnswer {
            match verdict {
                Verdict::Admitted => GrantAnswer::Granted(token),
                Verdict::Until(at) => GrantAnswer::Limited(Some(at - now)),
                Verdict::Spent => GrantAnswer::Limited(None),
                Verdict::Oversized => GrantAnswer::Held,
            }
        }

        /// Runs the table's case `name` against an authority's window; the
        /// window after it.
        fn run(name: &str) -> Usage {
            let case = CASES.iter().find(|c| c.name == name).expect("a case of the table");
            let mut u = Usage::default();
            let mut granted = Vec::new();
            for (i, step) in case.steps.iter().enumerate() {
                match *step {
                    Step::Ask { at, cost, expect } => {
                        let got = ask(&mut u, &claim(case.limits, cost), at);
                        assert_eq!(got, answer(expect, at, u.uses), "{name}: step {i}");
                        if let GrantAnswer::Granted(token) = got {
                            granted.push((token, at, cost));
                        }
                    }
                    Step::Reconcile { grant, used } => {
                        let (token, at, cost) = granted[grant];
                        let minute = u.reconcile(0, token, used);
                        assert!(minute || !case.limits.windowed(), "{name}: step {i}");
                        reconcile_at(&mut u.day, at, cost, used);
                    }
                }
            }
            u
        }

        #[test]
        fn the_shared_cases_hold() {
            for case in CASES {
                run(case.name);
            }
        }

        #[test]
        fn rpm_admits_n_a_minute_and_says_when_the_oldest_leaves() {
            let u = run("rpm admits n a minute and says when the oldest leaves");
            assert_eq!(u.window.len(), 3, "the first grant left the window");
        }

        #[test]
        fn min_interval_and_max_uses_keep_no_window() {
            let u = run("min_interval spaces grants and spent max_uses refuse for good");
            assert!(u.window.is_empty());
            assert_eq!((u.uses, u.last), (2, Some(5 * SECOND)));
        }
    }

    #[test]
    fn a_context_scope_counts_apart_and_answers_its_own_wait() {
        use repute_core::{Context, ContextLimits};
        let limits = Limits {
            rpm: Some(3),
            per_context: ContextLimits { rpm: Some(1), ..ContextLimits::default() },
            ..Limits::default()
        };
        let in_context =
            |name: &str| Claim { limits, cost: 1, context: Some(Context::new(name).unwrap()), groups: Vec::new() };
        let mut u = ResourceUsage::default();
        let (gpt, claude, other) = (in_context("gpt"), in_context("claude"), in_context("o1"));
        assert_eq!(u.judge(&gpt, 0), None);
        u.record(&gpt, 0, 1, 0);
        assert_eq!(u.judge(&gpt, SECOND), Some(GrantAnswer::ContextLimited(59 * SECOND)));
        assert_eq!(u.judge(&claude, SECOND), None);
        u.record(&claude, 0, 2, SECOND);
        u.record(&other, 0, 3, 2 * SECOND);
        // The resource's rpm is spent: its own wait, whatever the context.
        assert_eq!(u.judge(&in_context("new"), 3 * SECOND), Some(GrantAnswer::Limited(Some(57 * SECOND))));
        assert_eq!(u.scope(RESOURCE_SCOPE).usage.uses, 3);
        assert_eq!(u.scope("gpt").usage.window.len(), 1);
    }
}
