//! The protocol on an embedded pool, driven as an adapter drives it.

use std::sync::Arc;

use repute_core::{CellState, FailureKind, Registration, Secret, Selector, SECOND};

use super::*;
use crate::holder::{Field, Loss, OpenOptions};
use crate::ops::PoolOps;
use crate::providers::ManualClock;

fn names(_: Field) -> &'static str {
    "option"
}

/// `kind`'s resources `values`, chosen in registration order (strategy `first`).
fn pool(kind: &str, values: &[&str]) -> (Arc<Holder>, ManualClock) {
    let clock = ManualClock::new(0);
    let options = OpenOptions { strategy: Some("first".into()), ..Default::default() };
    let holder = Holder::open(options, Some(Arc::new(clock.clone())), names).unwrap();
    for value in values {
        holder.with(|p| p.register(kind, value, 1)).unwrap();
    }
    (holder, clock)
}

fn attempts(holder: &Arc<Holder>, context: &str) -> Attempts {
    Plan::default().checked(holder.clone()).unwrap().start(context)
}

fn next(a: &mut Attempts) -> Arc<HeldLease> {
    a.acquire(|| Ok::<(), Error>(())).unwrap()
}

fn value(lease: &HeldLease) -> String {
    lease.lease().resource.value().to_owned()
}

/// Outcomes folded into `value`'s cell in `context`.
fn observed(holder: &Holder, kind: &str, value: &str, context: &str) -> u64 {
    let cells = holder.with(|p| p.cells(kind, value)).unwrap();
    cells.iter().find(|c| c.context.as_ref().is_some_and(|c| c.as_str() == context)).map_or(0, |c| c.observations)
}

fn state(holder: &Holder, kind: &str, value: &str, context: &str) -> Option<CellState> {
    let cells = holder.with(|p| p.cells(kind, value)).unwrap();
    cells.iter().find(|c| c.context.as_ref().is_some_and(|c| c.as_str() == context)).map(|c| c.state)
}

fn live(holder: &Holder) -> u32 {
    holder.with(|p| p.stats()).unwrap().live_leases
}

fn retry_after(seconds: &str) -> Vec<(String, String)> {
    vec![("Retry-After".into(), seconds.into())]
}

#[test]
fn a_resources_fault_is_reported_at_once_and_the_request_moves_on() {
    let (holder, _clock) = pool("proxy", &["a", "b"]);
    let mut a = attempts(&holder, "example.com");
    let first = next(&mut a);
    assert_eq!((value(&first), a.begin(first.clone()).unwrap()), ("a".into(), Route::Proxy));
    assert_eq!(a.answered(429, retry_after("30"), None).unwrap(), Step::Retry);
    assert_eq!(live(&holder), 0, "the refused lease is released");
    assert_eq!(a.selector().exclude, ["a"]);

    let second = next(&mut a);
    assert_eq!(value(&second), "b");
    a.begin(second).unwrap();
    assert_eq!(a.answered(200, vec![], None).unwrap(), Step::Stream);
    assert_eq!(live(&holder), 1, "a delivered success holds its lease while its body streams");
    assert_eq!(observed(&holder, "proxy", "b", "example.com"), 0, "reported when the body ends");
    a.finished(None).unwrap();
    assert_eq!((live(&holder), observed(&holder, "proxy", "b", "example.com")), (0, 1));
    let refusal = holder.with(|p| p.acquire_with("example.com", &Selector::default()).map(drop));
    assert_eq!(refusal, Ok(()), "b is free again");
    match holder.with(|p| p.acquire_with("example.com", &Selector::default())) {
        Err(Error::NoResourceAvailable(r)) => assert_eq!((r.rate_limited, r.retry_after), (1, Some(30 * SECOND))),
        other => panic!("a is paused for its Retry-After, b leased: {other:?}"),
    }
    a.end().unwrap();
}

#[test]
fn the_same_error_on_a_second_resource_is_the_requests_and_punishes_neither() {
    for status in [400, 404, 500, 502] {
        let (holder, _clock) = pool("proxy", &["a", "b", "c"]);
        let mut a = attempts(&holder, "example.com");
        let first = next(&mut a);
        a.begin(first).unwrap();
        assert_eq!(a.answered(status, vec![], Some("{}".into())).unwrap(), Step::Retry, "{status}");
        let second = next(&mut a);
        assert_eq!(value(&second), "b");
        a.begin(second).unwrap();
        assert_eq!(a.answered(status, vec![], None).unwrap(), Step::Deliver, "{status}");
        a.end().unwrap();
        for v in ["a", "b"] {
            assert_eq!(observed(&holder, "proxy", v, "example.com"), 0, "{v} after {status}");
        }
        assert_eq!(live(&holder), 0);
        assert_eq!(a.made(), 2, "the third attempt is not made");
    }
}

#[test]
fn a_suspect_answer_another_resource_does_not_repeat_is_reported_as_the_profile_reads_it() {
    let (holder, _clock) = pool("proxy", &["a", "b"]);
    let mut a = attempts(&holder, "example.com");
    let first = next(&mut a);
    a.begin(first).unwrap();
    assert_eq!(a.answered(502, vec![], None).unwrap(), Step::Retry);
    assert_eq!(observed(&holder, "proxy", "a", "example.com"), 0, "held back");
    let second = next(&mut a);
    a.begin(second).unwrap();
    assert_eq!(a.answered(200, vec![], None).unwrap(), Step::Stream);
    assert_eq!(observed(&holder, "proxy", "a", "example.com"), 1, "the 502 was a's");
    a.finished(None).unwrap();
    let cells = holder.with(|p| p.cells("proxy", "a")).unwrap();
    let cell = cells.iter().find(|c| c.context.is_some()).unwrap();
    assert_eq!(cell.consecutive_failures, 1);
}

#[test]
fn a_suspect_on_the_last_attempt_or_the_only_resource_is_reported_when_the_request_ends() {
    let (holder, _clock) = pool("proxy", &["a"]);
    let plan = Plan { attempts: 1, ..Plan::default() };
    let mut a = plan.checked(holder.clone()).unwrap().start("example.com");
    let first = next(&mut a);
    a.begin(first).unwrap();
    assert_eq!(a.answered(500, vec![], None).unwrap(), Step::Deliver);
    assert_eq!(observed(&holder, "proxy", "a", "example.com"), 1);

    let mut a = attempts(&holder, "other.com");
    let first = next(&mut a);
    a.begin(first).unwrap();
    assert_eq!(a.answered(500, vec![], None).unwrap(), Step::Retry);
    let refused = a.acquire(|| Ok::<(), Error>(())).map(drop).unwrap_err();
    assert!(matches!(refused, Error::NoResourceAvailable(ref r) if r.registered == 0), "{refused:?}");
    assert_eq!(observed(&holder, "proxy", "a", "other.com"), 0);
    a.end().unwrap();
    assert_eq!(observed(&holder, "proxy", "a", "other.com"), 1, "no second resource could judge it");
    a.end().unwrap();
    assert_eq!(observed(&holder, "proxy", "a", "other.com"), 1, "ending twice reports once");
}

#[test]
fn a_suspect_waits_for_a_resource_another_request_holds_but_not_for_a_paused_one() {
    let quota = r#"{"error":{"type":"insufficient_quota","code":"insufficient_quota"}}"#;
    let spent =
        crate::profile::HttpAnswer { body: Some(quota.into()), ..crate::profile::HttpAnswer::status(429, 12.0) };
    let not_found = Some(r#"{"error":{"message":"The model `bad` does not exist","code":"model_not_found"}}"#.into());
    for busy in [false, true] {
        let (holder, _clock) = pool("openai", &["a", "b"]);
        let other = if busy {
            let b = Selector { exclude: vec!["a".into()], ..Selector::default() };
            Some(holder.try_acquire("bad", &b).unwrap().expect("b is free"))
        } else {
            holder.report_http("openai", "b", "bad", &spent).unwrap();
            None
        };
        let mut a = attempts(&holder, "bad");
        a.next_now().unwrap();
        assert_eq!(a.resource().map(|r| r.value()), Some("a"));
        assert_eq!(a.answered(404, vec![], not_found.clone()).unwrap(), Step::Retry, "a 404 is a suspect");
        let refusal = a.next_now().unwrap_err();
        match (busy, a.refused(&refusal)) {
            (false, Refused::GiveUp) | (true, Refused::Wait(_)) => {}
            (_, got) => panic!("b {}: {got:?} for {refusal:?}", if busy { "leased" } else { "paused" }),
        }
        if !busy {
            let blocking = a.acquire(|| Ok::<(), Error>(())).map(drop);
            assert!(matches!(blocking, Err(Error::NoResourceAvailable(_))), "a blocking acquire gives up too");
        }
        a.end().unwrap();
        assert_eq!(observed(&holder, "openai", "a", "bad"), 1, "the suspect is reported as the profile reads it");
        if let Some(other) = other {
            other.release().unwrap();
        }
        assert_eq!(live(&holder), 0);
    }
}

#[test]
fn with_only_tried_resources_left_the_request_waits_for_them_within_its_time() {
    let (holder, clock) = pool("proxy", &["a"]);
    let plan = Plan { timeout: Some(10 * SECOND), ..Plan::default() };
    let mut a = plan.checked(holder.clone()).unwrap().start("example.com");
    let first = next(&mut a);
    a.begin(first).unwrap();
    assert_eq!(a.answered(429, retry_after("2"), None).unwrap(), Step::Retry);
    // Only `a` is left, paused 2 s: the exclusion is dropped and the wait
    // is the pause's (the manual clock moves as the acquire waits).
    let waiter = {
        let clock = clock.clone();
        std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(50));
            clock.advance(2 * SECOND);
        })
    };
    let again = next(&mut a);
    waiter.join().unwrap();
    assert_eq!(value(&again), "a");
    assert!(a.selector().exclude.is_empty(), "tried again once nothing else is left");
    a.begin(again).unwrap();
    assert_eq!(a.answered(200, vec![], None).unwrap(), Step::Stream);
    a.finished(None).unwrap();
    assert_eq!(state(&holder, "proxy", "a", "example.com"), Some(CellState::Healthy));
}

#[test]
fn when_nothing_it_has_not_tried_is_free_the_request_goes_back_to_what_it_tried() {
    let (holder, _clock) = pool("proxy", &["a", "b"]);
    let plan = Plan { timeout: Some(10 * SECOND), ..Plan::default() }.checked(holder.clone()).unwrap();
    let mut a = plan.start("example.com");
    let first = next(&mut a);
    assert_eq!(value(&first), "a");
    let other = holder.acquire_now("example.com", &Selector::default()).unwrap();
    assert_eq!(value(&other), "b", "another request holds b");
    a.begin(first).unwrap();
    assert_eq!(a.failed(FailureKind::ConnectionReset).unwrap(), Step::Retry);
    // Only b is untried, and it is held: `a` is free again and is taken at
    // once, not waited past while the request's time runs out.
    let refusal = a.next_now().unwrap_err();
    assert_eq!(a.refused(&refusal), Refused::Again);
    assert!(a.selector().exclude.is_empty());
    a.next_now().unwrap();
    assert_eq!(a.resource().map(ResourceId::value), Some("a"));
    assert_eq!(a.answered(200, vec![], None).unwrap(), Step::Stream);
    a.finished(None).unwrap();

    // The waiting acquire goes back alike.
    let mut a = plan.start("example.com");
    let first = next(&mut a);
    a.begin(first).unwrap();
    assert_eq!(a.failed(FailureKind::ConnectionReset).unwrap(), Step::Retry);
    assert_eq!(value(&next(&mut a)), "a");
    drop(other);
}

#[test]
fn attempts_and_time_bound_the_request() {
    let (holder, clock) = pool("proxy", &["a", "b", "c", "d"]);
    let plan = Plan { attempts: 2, ..Plan::default() };
    let mut a = plan.checked(holder.clone()).unwrap().start("example.com");
    for expected in [Step::Retry, Step::Deliver] {
        let lease = next(&mut a);
        a.begin(lease).unwrap();
        assert_eq!(a.failed(FailureKind::ConnectionReset).unwrap(), expected);
    }
    assert_eq!(live(&holder), 0);

    let plan = Plan { timeout: Some(SECOND), ..Plan::default() };
    let mut a = plan.checked(holder.clone()).unwrap().start("example.com");
    let lease = next(&mut a);
    a.begin(lease).unwrap();
    clock.advance(SECOND);
    assert_eq!(a.answered(429, vec![], None).unwrap(), Step::Deliver, "no time is left");
    assert_eq!(a.refused(&Error::RateLimited { retry_after: 1 }), Refused::GiveUp);
}

#[test]
fn an_api_key_carries_its_secret_where_the_provider_reads_it_and_a_provider_outage_is_no_keys_fault() {
    let clock = ManualClock::new(0);
    let holder = Holder::open(OpenOptions::default(), Some(Arc::new(clock.clone())), names).unwrap();
    for (value, secret) in [("k1", "sk-one"), ("k2", "sk-two")] {
        let registration = Registration { secret: Some(Secret::new(secret).unwrap()), ..Registration::new(1) };
        holder.with(|p| p.register_with("anthropic", value, &registration)).unwrap();
    }
    let mut a = attempts(&holder, "claude-sonnet-4");
    let first = next(&mut a);
    let route = a.begin(first).unwrap();
    assert!(matches!(route, Route::Header { name: "x-api-key", ref value } if value.starts_with("sk-")));
    let overloaded = r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
    assert_eq!(a.answered(529, vec![], Some(overloaded.into())).unwrap(), Step::Retry);
    let second = next(&mut a);
    a.begin(second).unwrap();
    // A second failure of the provider on a second key is still the
    // provider's, not the request's (a 500 too: every key reaches the same
    // servers): it tries again, on the first key once both were tried.
    let internal = r#"{"type":"error","error":{"type":"api_error","message":"Internal server error"}}"#;
    assert_eq!(a.answered(500, vec![], Some(internal.into())).unwrap(), Step::Retry);
    let third = next(&mut a);
    a.begin(third).unwrap();
    assert_eq!(a.answered(529, vec![], Some(overloaded.into())).unwrap(), Step::Deliver, "attempts spent");
    a.end().unwrap();
    assert_eq!((a.made(), live(&holder)), (3, 0));
    for v in ["k1", "k2"] {
        assert_eq!(observed(&holder, "anthropic", v, "claude-sonnet-4"), 0);
    }
    // The provider's failure between a suspect and its second opinion leaves it held.
    let registration = Registration { secret: Some(Secret::new("sk-three").unwrap()), ..Registration::new(1) };
    holder.with(|p| p.register_with("anthropic", "k3", &registration)).unwrap();
    let mut a = attempts(&holder, "claude-sonnet-4");
    let bad = r#"{"type":"error","error":{"type":"invalid_request_error","message":"messages: field required"}}"#;
    let first = next(&mut a);
    a.begin(first).unwrap();
    assert_eq!(a.answered(400, vec![], Some(bad.into())).unwrap(), Step::Retry);
    let second = next(&mut a);
    a.begin(second).unwrap();
    assert_eq!(a.answered(500, vec![], Some(internal.into())).unwrap(), Step::Retry);
    let third = next(&mut a);
    a.begin(third).unwrap();
    assert_eq!(a.answered(400, vec![], Some(bad.into())).unwrap(), Step::Deliver, "the 400 repeated");
    a.end().unwrap();
    for v in ["k1", "k2", "k3"] {
        assert_eq!(observed(&holder, "anthropic", v, "claude-sonnet-4"), 0, "{v}: neither 400 is the key's");
    }

    // A dead key is the key's: reported, and the request moves on.
    let mut a = attempts(&holder, "claude-sonnet-4");
    let first = next(&mut a);
    let dead = value(&first);
    a.begin(first).unwrap();
    let invalid = r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#;
    assert_eq!(a.answered(401, vec![], Some(invalid.into())).unwrap(), Step::Retry);
    let second = next(&mut a);
    assert_ne!(value(&second), dead);
    a.begin(second).unwrap();
    assert_eq!(a.answered(200, vec![], None).unwrap(), Step::Stream);
    a.finished(None).unwrap();
    let views = holder.with(|p| p.resources()).unwrap();
    let blocked: Vec<_> = views.iter().filter(|v| v.block.is_some()).map(|v| v.resource.value().to_owned()).collect();
    assert_eq!(blocked, [dead]);
}

#[test]
fn a_cut_stream_is_the_resources_failure() {
    let (holder, clock) = pool("proxy", &["a"]);
    let mut a = attempts(&holder, "example.com");
    let lease = next(&mut a);
    a.begin(lease).unwrap();
    assert_eq!(a.answered(200, vec![], None).unwrap(), Step::Stream);
    clock.advance(SECOND);
    a.finished(Some(FailureKind::ConnectionReset)).unwrap();
    let cells = holder.with(|p| p.cells("proxy", "a")).unwrap();
    let cell = cells.iter().find(|c| c.context.is_some()).unwrap();
    assert_eq!((cell.observations, cell.consecutive_failures), (1, 1));
    assert_eq!(live(&holder), 0);
}

#[test]
fn a_bad_plan_names_its_part_and_misuse_is_refused() {
    let (holder, _clock) = pool("proxy", &["a"]);
    let bad = |plan: Plan| plan.checked(holder.clone()).map(drop).unwrap_err();
    assert_eq!(bad(Plan { attempts: 0, ..Plan::default() }), Error::invalid("attempts", "must be in 1..=16"));
    assert_eq!(bad(Plan { attempts: 17, ..Plan::default() }), Error::invalid("attempts", "must be in 1..=16"));
    assert_eq!(bad(Plan { timeout: Some(0), ..Plan::default() }), Error::invalid("timeout", "must be > 0"));
    let exclude = Selector { exclude: vec![String::new()], ..Selector::default() };
    assert_eq!(bad(Plan { selector: exclude, ..Plan::default() }), Error::invalid("exclude", "must not be empty"));
    let mut a = attempts(&holder, "c");
    assert_eq!(a.answered(200, vec![], None), Err(Error::invalid("attempt", "must be begun before it is answered")));
    assert_eq!(a.failed(FailureKind::Timeout), Err(Error::invalid("attempt", "must be begun before it fails")));
    let lease = next(&mut a);
    a.begin(lease).unwrap();
    assert_eq!(a.answered(99, vec![], None), Err(Error::invalid("status", "must be an HTTP status code in 100..=599")));
    a.end().unwrap();
    assert_eq!(live(&holder), 0, "ending releases the lease in flight");
}

#[test]
fn a_stream_whose_lease_was_lost_is_still_reported_and_frees_its_permit() {
    let (holder, clock) = pool("proxy", &["a"]);
    // The clock jumps past the TTL at once, as for a process that was
    // stopped: the watcher finds the lease lost, not due for renewal.
    let mut a = attempts(&holder, "example.com");
    let lease = next(&mut a);
    a.begin(lease).unwrap();
    assert_eq!(a.answered(200, vec![], None).unwrap(), Step::Stream);
    clock.advance(120 * SECOND);
    a.finished(None).unwrap();
    assert_eq!((observed(&holder, "proxy", "a", "example.com"), live(&holder)), (1, 0));
}

/// Waits (on real time, bounded) until the pool's watcher has renewed
/// `lease` past `expires_at`; the manual clock does not move meanwhile.
fn renewed_past(lease: &HeldLease, expires_at: u64) -> u64 {
    for _ in 0..2_000 {
        if lease.expires_at() > expires_at {
            return lease.expires_at();
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    panic!("the watcher did not renew the lease (it expires at {})", lease.expires_at());
}

#[test]
fn a_call_and_its_body_that_outlast_the_lease_ttl_keep_their_permit() {
    let (holder, clock) = pool("key", &["k"]);
    let mut a = attempts(&holder, "gpt-4o");
    let lease = next(&mut a);
    a.begin(lease.clone()).unwrap();
    let ttl = lease.lease().ttl;
    // A slow answer, then a slow body: four times the TTL in all, each
    // step past a third of it, when the watcher renews.
    let mut expires_at = lease.expires_at();
    for step in 0..8 {
        if step == 4 {
            assert_eq!(a.answered(200, vec![], None).unwrap(), Step::Stream);
        }
        clock.advance(ttl / 2);
        expires_at = renewed_past(&lease, expires_at);
        assert_eq!((lease.lost(), live(&holder)), (None, 1), "held at step {step}");
        let other = holder.with(|p| p.acquire_with("gpt-4o", &Selector::default()).map(drop));
        assert!(matches!(other, Err(Error::NoResourceAvailable(_))), "not granted twice at step {step}: {other:?}");
    }
    a.finished(None).unwrap();
    assert_eq!((live(&holder), observed(&holder, "key", "k", "gpt-4o")), (0, 1));
}

#[test]
fn a_body_nobody_closes_frees_its_permit_after_the_longest_hold() {
    let (holder, clock) = pool("key", &["k"]);
    let mut a = attempts(&holder, "gpt-4o");
    let lease = next(&mut a);
    a.begin(lease.clone()).unwrap();
    assert_eq!(a.answered(200, vec![], None).unwrap(), Step::Stream);
    let step = lease.lease().ttl / 2;
    let mut expires_at = lease.expires_at();
    while holder.now() + step < MAX_HOLD {
        clock.advance(step);
        expires_at = renewed_past(&lease, expires_at);
    }
    clock.advance(step);
    for _ in 0..2_000 {
        if lease.lost().is_some() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert_eq!((lease.lost(), live(&holder)), (Some(Loss::MaxHold), 0));
    // The caller closes it late: the outcome is still counted, nothing raised.
    a.finished(None).unwrap();
    assert_eq!(observed(&holder, "key", "k", "gpt-4o"), 1);
}

#[test]
fn attempts_let_go_of_without_an_end_give_their_lease_back() {
    let (holder, _clock) = pool("proxy", &["a"]);
    let mut a = attempts(&holder, "example.com");
    let lease = next(&mut a);
    a.begin(lease.clone()).unwrap();
    assert_eq!(a.answered(200, vec![], None).unwrap(), Step::Stream);
    assert_eq!(live(&holder), 1);
    drop(a);
    assert_eq!((live(&holder), lease.released()), (0, true));
    assert_eq!(observed(&holder, "proxy", "a", "example.com"), 0, "a body nobody read is not reported");
}

#[test]
fn next_acquires_and_begins_in_one_call_and_next_now_returns_the_refusal() {
    let (holder, _clock) = pool("proxy", &["a", "b"]);
    let mut a = attempts(&holder, "example.com");
    assert_eq!(a.resource(), None, "nothing in flight before the first attempt");
    assert_eq!(a.next(|| Ok::<(), Error>(())).unwrap(), Route::Proxy);
    assert_eq!(a.resource().map(|r| r.value()), Some("a"));
    assert_eq!((a.made(), live(&holder)), (1, 1));
    assert_eq!(a.answered(429, retry_after("30"), None).unwrap(), Step::Retry);
    assert_eq!(a.resource(), None, "a settled attempt is no longer in flight");
    assert_eq!(a.next_now().unwrap(), Route::Proxy);
    assert_eq!(a.resource().map(|r| r.value()), Some("b"), "the tried resource is excluded");
    assert_eq!(a.answered(200, vec![], None).unwrap(), Step::Stream);
    a.finished(None).unwrap();
    assert_eq!(observed(&holder, "proxy", "b", "example.com"), 1);

    // `b` is leased by another request and `a` paused: the refusal comes
    // back unchanged, and the attempt in flight, if any, is not ended by it.
    let mut other = attempts(&holder, "example.com");
    assert_eq!(other.next_now().unwrap(), Route::Proxy);
    let mut third = attempts(&holder, "example.com");
    match third.next_now() {
        Err(Error::NoResourceAvailable(r)) => assert_eq!((r.rate_limited, r.leased), (1, 1)),
        got => panic!("refused while a is paused and b leased: {got:?}"),
    }
    assert_eq!((third.made(), other.resource().map(|r| r.value())), (0, Some("b")));
    other.end().unwrap();
    assert_eq!(live(&holder), 0);
}

#[test]
fn requests_wish_alike_until_what_they_ask_for_differs() {
    let (holder, _clock) = pool("proxy", &["a", "b"]);
    let (mut one, two) = (attempts(&holder, "example.com"), attempts(&holder, "example.com"));
    assert_eq!(one.wish(), two.wish(), "the same plan and context: answered alike");
    assert_ne!(one.wish(), attempts(&holder, "other.example").wish(), "another context");
    let kind = Plan { selector: Selector { kind: Some("key".into()), ..Default::default() }, ..Default::default() };
    assert_ne!(one.wish(), kind.checked(holder.clone()).unwrap().start("example.com").wish(), "another kind");
    let prefer = Plan { selector: Selector { prefer: Some("b".into()), ..Default::default() }, ..Default::default() };
    assert_eq!(
        one.wish(),
        prefer.checked(holder.clone()).unwrap().start("example.com").wish(),
        "a preference only orders the choice"
    );

    let first = next(&mut one);
    one.begin(first).unwrap();
    assert_eq!(one.answered(429, retry_after("30"), None).unwrap(), Step::Retry);
    assert_ne!(one.wish(), two.wish(), "one has tried a and no longer asks for it");
    one.end().unwrap();
}
