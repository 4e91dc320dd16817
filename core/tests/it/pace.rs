//! A cell paces its grants by the rate it learned from the limits it met
//! (`crate::pace` in the core), where no limit is registered.

use crate::common::*;
use repute_core::{Error, FailureKind, Outcome, Pool};

fn limited(wait: u64) -> Outcome {
    Outcome::failure_retry_after(FailureKind::RateLimited, 10.0, wait).unwrap()
}

/// Grants in `context` at `now`, each released at once, until a refusal
/// or ten; how many.
fn grants(p: &mut Pool, context: &str, now: u64) -> usize {
    let mut n = 0;
    while n < 10 {
        match p.acquire(&ctx(context), now) {
            Ok(l) => {
                p.release(l.id, l.token, now).unwrap();
                n += 1;
            }
            Err(Error::NoResourceAvailable(_)) => return n,
            Err(e) => panic!("{e}"),
        }
    }
    n
}

#[test]
fn a_cell_that_met_a_slice_limit_is_paced_at_what_got_through() {
    let mut p = first_pool();
    p.register(rid("a"), 4, 0).unwrap();
    // A burst of four sent at 0: two let through (answered in 12 ms), two
    // told (in 10 ms) to wait out the slice, which ends at 1 s.
    let ms = S / 1000;
    p.report(&rid("a"), &ctx("shop"), limited(990 * ms), 10 * ms).unwrap();
    p.report(&rid("a"), &ctx("shop"), limited(990 * ms), 10 * ms).unwrap();
    p.report(&rid("a"), &ctx("shop"), ok(), 12 * ms).unwrap();
    p.report(&rid("a"), &ctx("shop"), ok(), 12 * ms).unwrap();
    assert_eq!(grants(&mut p, "shop", S / 2), 0, "paused for the provider's wait");
    // 2 answers in a period of 1 s, paced at 1.8 a second: one grant per 556 ms.
    assert_eq!(grants(&mut p, "shop", S), 1);
    // The refusal says so, and when the next grant fits.
    match p.acquire(&ctx("shop"), S + 100 * ms) {
        Err(Error::NoResourceAvailable(r)) => {
            assert_eq!((r.rate_limited, r.leased, r.limited), (1, 0, 0));
            assert_eq!(r.retry_after, Some(555_555_556 - 100 * ms));
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    // A restored pool keeps the pace and the wait for the next grant.
    let mut restored = first_pool();
    restored.restore(&p.snapshot(S + 100 * ms, true), S + 100 * ms).unwrap();
    for p in [&mut p, &mut restored] {
        assert_eq!(grants(p, "shop", S + 555 * ms), 0);
        assert_eq!(grants(p, "shop", S + 556 * ms), 1);
        assert_eq!(grants(p, "shop", S + 1111 * ms), 0);
        assert_eq!(grants(p, "shop", S + 1112 * ms), 1);
    }
    // The same resource met no limit elsewhere: not paced there.
    assert_eq!(grants(&mut p, "news", S), 10);
}
