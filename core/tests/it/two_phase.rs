//! The two-phase acquire (`propose` then `settle`) against the one-call
//! `acquire`: the same answers from the authority must give the same leases,
//! events and state, byte for byte.

use std::sync::{Arc, Mutex};

use crate::common::*;
use proptest::prelude::*;
use repute_core::{
    Authority, Error, FailureKind, GrantAnswer, GrantRequest, LeaseKind, Policy, Pool, Proposal, Refusal, ResourceId,
    Selector, Settled, Strategy as Pick,
};

const RESOURCES: [&str; 4] = ["r0", "r1", "r2", "r3"];
const CONTEXTS: [&str; 2] = ["c0", "c1"];

/// Which permits the authority says are held elsewhere, and the tokens it mints.
#[derive(Debug, Default)]
struct Answers {
    refused: Vec<(String, u32)>,
    /// Added to `last` for a granted token, so tokens skip like a shared counter's.
    step: u64,
}

impl Answers {
    fn answer(&self, resource: &ResourceId, permit: u32, last: u64) -> Option<u64> {
        let held = self.refused.iter().any(|(v, p)| v == resource.value() && *p == permit);
        (!held).then_some(last + 1 + self.step)
    }
}

/// The one-call pool's authority: the shared answers.
#[derive(Debug)]
struct Scripted(Arc<Mutex<Answers>>);

impl Authority for Scripted {
    fn grant(&mut self, resource: &ResourceId, permit: u32, grant: GrantRequest<'_>) -> GrantAnswer {
        held_or(self.0.lock().unwrap().answer(resource, permit, grant.last))
    }
    fn extend(&mut self, _: &ResourceId, _: u32, _: u64, _: u64) -> bool {
        true
    }
    fn revoke(&mut self, _: &ResourceId, _: u32, _: u64) {}
}

/// A token granted, none held.
fn held_or(token: Option<u64>) -> GrantAnswer {
    token.map_or(GrantAnswer::Held, GrantAnswer::Granted)
}

fn resource_of(pool: &Pool, proposal: &Proposal) -> ResourceId {
    pool.resource_at(proposal.resource).expect("a fresh proposal names a live registration").clone()
}

/// An acquire the way a host with an asynchronous authority drives it.
fn two_phase(pool: &mut Pool, answers: &Answers, context: &str, now: u64) -> repute_core::Result<repute_core::Lease> {
    let context = ctx(context);
    let mut proposal = pool.propose(&context, &Selector::default(), now, &[])?;
    loop {
        let answer = held_or(answers.answer(&resource_of(pool, &proposal), proposal.permit, proposal.last));
        match pool.settle(&context, &Selector::default(), proposal, answer, &[])? {
            Settled::Granted(lease) => return Ok(lease),
            Settled::Next(next) => proposal = next,
        }
    }
}

#[derive(Debug, Clone)]
enum Cmd {
    Register(usize, u32),
    Unregister(usize),
    Acquire(usize),
    Release(usize),
    Report(usize, usize, bool),
    Refuse(usize, u32),
    Allow,
    Advance(u64),
}

fn cmd() -> impl Strategy<Value = Cmd> {
    let r = 0..RESOURCES.len();
    let c = 0..CONTEXTS.len();
    prop_oneof![
        3 => (r.clone(), 1u32..3).prop_map(|(r, p)| Cmd::Register(r, p)),
        1 => r.clone().prop_map(Cmd::Unregister),
        8 => c.clone().prop_map(Cmd::Acquire),
        4 => (0usize..6).prop_map(Cmd::Release),
        5 => (r.clone(), c, any::<bool>()).prop_map(|(r, c, ok)| Cmd::Report(r, c, ok)),
        2 => (r, 0u32..2).prop_map(|(r, p)| Cmd::Refuse(r, p)),
        1 => Just(Cmd::Allow),
        3 => prop_oneof![0u64..5 * S, 0u64..900 * S].prop_map(Cmd::Advance),
    ]
}

fn pick() -> impl Strategy<Value = Pick> {
    prop_oneof![Just(Pick::Classic), Just(Pick::Thompson), Just(Pick::First)]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn two_phase_acquire_matches_one_call_acquire(
        strategy in pick(),
        seed in any::<u64>(),
        step in 0u64..3,
        cmds in proptest::collection::vec(cmd(), 1..80),
    ) {
        let policy = Policy { strategy, ..Policy::default() };
        let answers = Arc::new(Mutex::new(Answers { step, ..Answers::default() }));
        let mut one = Pool::new(policy.clone(), seed).unwrap();
        one.set_authority(Box::new(Scripted(answers.clone())));
        let mut two = Pool::new(policy, seed).unwrap();
        let mut now = 0;
        let mut held = Vec::new();
        for cmd in &cmds {
            match cmd {
                Cmd::Register(r, p) => {
                    let id = rid(RESOURCES[*r]);
                    prop_assert_eq!(one.register(id.clone(), *p, now), two.register(id, *p, now));
                }
                Cmd::Unregister(r) => {
                    let id = rid(RESOURCES[*r]);
                    prop_assert_eq!(one.unregister(&id, true, now), two.unregister(&id, true, now));
                }
                Cmd::Acquire(c) => {
                    let a = one.acquire(&ctx(CONTEXTS[*c]), now);
                    let b = two_phase(&mut two, &answers.lock().unwrap(), CONTEXTS[*c], now);
                    prop_assert_eq!(&a, &b);
                    if let Ok(lease) = a {
                        held.push(lease);
                    }
                }
                Cmd::Release(i) if !held.is_empty() => {
                    let lease = held.remove(i % held.len());
                    prop_assert_eq!(
                        one.release(lease.id, lease.token, now),
                        two.release(lease.id, lease.token, now)
                    );
                }
                Cmd::Release(_) => {}
                Cmd::Report(r, c, ok) => {
                    let outcome = if *ok { crate::common::ok() } else { fail(FailureKind::Timeout) };
                    let (id, context) = (rid(RESOURCES[*r]), ctx(CONTEXTS[*c]));
                    prop_assert_eq!(
                        one.report(&id, &context, outcome, now),
                        two.report(&id, &context, outcome, now)
                    );
                }
                Cmd::Refuse(r, p) => answers.lock().unwrap().refused.push((RESOURCES[*r].to_owned(), *p)),
                Cmd::Allow => answers.lock().unwrap().refused.clear(),
                Cmd::Advance(d) => now += d,
            }
            prop_assert_eq!(one.drain_events(), two.drain_events());
        }
        prop_assert_eq!(one.snapshot(now, true), two.snapshot(now, true));
    }
}

fn pool_with(values: &[&str]) -> Pool {
    let mut pool = first_pool();
    for v in values {
        pool.register(rid(v), 1, 0).unwrap();
    }
    pool
}

#[test]
fn a_proposal_holds_nothing_until_it_is_settled() {
    let mut pool = pool_with(&["a"]);
    let proposal = pool.propose(&ctx("c"), &Selector::default(), 5 * S, &[]).unwrap();
    assert_eq!((proposal.permit, proposal.last, proposal.at), (0, 0, 5 * S));
    assert_eq!(pool.stats().live_leases, 0);
    assert_eq!(pool.stats().available, 1);
    let again = pool.propose(&ctx("c"), &Selector::default(), 6 * S, &[]).unwrap();
    assert_eq!(again.resource, proposal.resource, "the dropped proposal left the permit free");
}

#[test]
fn a_granted_proposal_is_dated_from_the_proposal_and_carries_the_authority_token() {
    let mut pool = pool_with(&["a"]);
    let proposal = pool.propose(&ctx("c"), &Selector::default(), 5 * S, &[]).unwrap();
    pool.advance(7 * S);
    let Settled::Granted(lease) =
        pool.settle(&ctx("c"), &Selector::default(), proposal, GrantAnswer::Granted(41), &[]).unwrap()
    else {
        panic!("a token grants the lease");
    };
    assert_eq!((lease.token, lease.kind, lease.granted_at), (41, LeaseKind::Client, 5 * S));
    assert_eq!(lease.expires_at, 5 * S + Policy::default().lease_ttl);
    assert_eq!(pool.leases(), vec![lease]);
}

#[test]
fn refusals_move_on_to_other_candidates_and_then_run_out() {
    let mut pool = pool_with(&["a", "b"]);
    let c = ctx("c");
    let first = pool.propose(&c, &Selector::default(), 0, &[]).unwrap();
    let Settled::Next(second) = pool.settle(&c, &Selector::default(), first.clone(), GrantAnswer::Held, &[]).unwrap()
    else {
        panic!("another candidate is free");
    };
    assert_ne!(second.resource, first.resource);
    assert_eq!(second.refused, vec![(first.resource, 0)]);
    assert_eq!(
        pool.settle(&c, &Selector::default(), second, GrantAnswer::Held, &[]),
        Err(Error::NoResourceAvailable(leased(2)))
    );
    assert_eq!(pool.stats().available, 2, "refused permits are free again once the acquire ends");
}

#[test]
fn a_refused_permit_leaves_the_other_permits_of_its_resource_selectable() {
    let mut pool = first_pool();
    pool.register(rid("a"), 3, 0).unwrap();
    let c = ctx("c");
    let first = pool.propose(&c, &Selector::default(), 0, &[]).unwrap();
    assert_eq!(first.permit, 0);
    let Settled::Next(second) = pool.settle(&c, &Selector::default(), first.clone(), GrantAnswer::Held, &[]).unwrap()
    else {
        panic!("two permits are free")
    };
    assert_eq!((second.resource, second.permit), (first.resource, 1));
    let Settled::Granted(lease) = pool.settle(&c, &Selector::default(), second, GrantAnswer::Granted(1), &[]).unwrap()
    else {
        panic!("granted")
    };
    assert_eq!((lease.resource, lease.permit), (rid("a"), 1));
    assert_eq!(pool.resources()[0].leased, 1, "the refused permit is free again");
}

#[test]
fn permits_in_flight_are_not_proposed_again() {
    let mut pool = pool_with(&["a", "b"]);
    let c = ctx("c");
    let first = pool.propose(&c, &Selector::default(), 0, &[]).unwrap();
    let second = pool.propose(&c, &Selector::default(), 0, &[(first.resource, first.permit)]).unwrap();
    assert_ne!(second.resource, first.resource);
    let both = [(first.resource, first.permit), (second.resource, second.permit)];
    assert_eq!(pool.propose(&c, &Selector::default(), 0, &both), Err(Error::NoResourceAvailable(leased(2))));
    // A refusal moves on past the permits in flight too.
    let in_flight = [(second.resource, second.permit)];
    assert_eq!(
        pool.settle(&c, &Selector::default(), first, GrantAnswer::Held, &in_flight),
        Err(Error::NoResourceAvailable(leased(2)))
    );
    assert_eq!(pool.stats().available, 2, "nothing stays marked");
}

#[test]
fn a_token_not_above_the_last_seen_is_a_refusal() {
    let mut pool = pool_with(&["a"]);
    let c = ctx("c");
    let proposal = pool.propose(&c, &Selector::default(), 0, &[]).unwrap();
    assert_eq!(
        pool.settle(&c, &Selector::default(), proposal, GrantAnswer::Granted(0), &[]),
        Err(Error::NoResourceAvailable(leased(1)))
    );
    assert_eq!(pool.stats().live_leases, 0);
}

#[test]
fn a_proposal_overtaken_by_another_grant_is_refused_and_changes_nothing() {
    let mut pool = pool_with(&["a"]);
    let c = ctx("c");
    let early = pool.propose(&c, &Selector::default(), 0, &[]).unwrap();
    let late = pool.propose(&c, &Selector::default(), 0, &[]).unwrap();
    let Settled::Granted(lease) = pool.settle(&c, &Selector::default(), late, GrantAnswer::Granted(1), &[]).unwrap()
    else {
        panic!("granted")
    };
    let before = pool.snapshot(0, true);
    let held = Error::InvalidInput { field: "proposal", rule: "names a permit that is held" };
    assert_eq!(pool.settle(&c, &Selector::default(), early.clone(), GrantAnswer::Granted(2), &[]), Err(held));
    assert_eq!(pool.snapshot(0, true), before);
    pool.release(lease.id, lease.token, 0).unwrap();
    let overtaken = Error::InvalidInput { field: "proposal", rule: "was overtaken by a newer token for its permit" };
    assert_eq!(pool.settle(&c, &Selector::default(), early, GrantAnswer::Granted(2), &[]), Err(overtaken));
}

#[test]
fn a_proposal_for_a_resource_unregistered_since_is_refused() {
    let mut pool = pool_with(&["a"]);
    let c = ctx("c");
    let proposal = pool.propose(&c, &Selector::default(), 0, &[]).unwrap();
    pool.unregister(&rid("a"), false, 0).unwrap();
    pool.register(rid("a"), 1, 0).unwrap();
    assert_eq!(
        pool.settle(&c, &Selector::default(), proposal, GrantAnswer::Granted(1), &[]),
        Err(Error::UnknownResource)
    );
    assert_eq!(pool.stats().live_leases, 0);
}

#[test]
fn a_proposal_this_pool_did_not_make_is_refused() {
    let mut pool = pool_with(&["a"]);
    let c = ctx("c");
    let proposal = pool.propose(&c, &Selector::default(), 3 * S, &[]).unwrap();
    let foreign = Error::InvalidInput { field: "proposal", rule: "was not made by this pool" };
    let no_permit = Error::InvalidInput { field: "proposal", rule: "names a permit the resource does not have" };
    for (forged, err) in [
        (Proposal { at: 4 * S, ..proposal.clone() }, foreign.clone()),
        (Proposal { ttl: 1, ..proposal.clone() }, foreign),
        (Proposal { permit: 1, ..proposal.clone() }, no_permit),
    ] {
        assert_eq!(pool.settle(&c, &Selector::default(), forged, GrantAnswer::Granted(1), &[]), Err(err));
    }
    assert_eq!(pool.stats().live_leases, 0);
}

/// The refusal of `n` resources whose permits the authority holds elsewhere.
fn leased(n: u32) -> Refusal {
    Refusal { registered: n, leased: n, ..Refusal::default() }
}
