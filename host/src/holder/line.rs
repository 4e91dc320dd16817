//! Acquires waiting in this process for a permit, in line.
//!
//! A release frees one permit, so it wakes one waiter: the one longest in
//! line (an acquire takes its place at its first refusal and keeps it). A
//! waiter that cannot use what was freed (an acquire that did not wait took
//! it first, or it is not what this one's context and selector admit) hands
//! the wake on to the next in line that has not tried since that release
//! and wishes for something else. Waiters that wish alike are answered
//! alike, so they cost one try a release between them, where a condition
//! variable's `notify_all` cost each of them a try: at 400 threads over 4
//! permits, 90 times the CPU of a grant nobody waits for. A change that may
//! free many (a register, an unblock, a restore, closing) wakes every
//! waiter. A change this process does not see (another process, an expiry)
//! wakes no one: the waiting plan's backoff bounds that wait.
//!
//! [`Order`] decides who is woken and holds the wakes; it waits for
//! nothing. The holder's threads wait on bells ([`Line`]); the asyncio and
//! Node front ends keep an `Order` each and wait on their own event loop's
//! futures, keyed by place.

use std::collections::{BTreeMap, HashMap};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::ops::Bound;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use repute_core::Selector;

/// What an acquire asks the pool for, hashed: acquires with the same wish
/// are refused or granted alike (`prefer` and `affinity` only order the
/// choice and are left out).
pub fn wish(context: &str, selector: &Selector) -> u64 {
    let mut h = DefaultHasher::new();
    (context, &selector.kind, &selector.exclude, selector.cost).hash(&mut h);
    for filter in &selector.labels {
        (&filter.name, &filter.values).hash(&mut h);
    }
    h.finish()
}

/// Who waits, in what order, and who holds a wake.
#[derive(Debug, Default)]
pub struct Order {
    places: u64,
    /// Wakes made, counted.
    releases: u64,
    sleeping: BTreeMap<u64, Sleeper>,
    /// Places woken for a release that have not yet said whether they
    /// could use it.
    held: HashMap<u64, Held>,
}

#[derive(Debug, Clone, Copy)]
struct Sleeper {
    /// The last wake this waiter tried after: one it need not be woken for.
    seen: u64,
    wish: u64,
}

#[derive(Debug)]
struct Held {
    wish: u64,
    release: u64,
    /// What the waiters this release woke wished for and were refused.
    refused: Vec<u64>,
}

impl Order {
    /// A place in line for one acquire, behind every one before it.
    pub fn place(&mut self) -> u64 {
        self.places += 1;
        self.places
    }

    /// `place` waits, wishing `wish`: call before anything can free what
    /// its last try was refused (under the pool's lock, or on the event
    /// loop that runs the releases).
    pub fn lie_down(&mut self, place: u64, wish: u64) {
        self.sleeping.insert(place, Sleeper { seen: self.releases, wish });
    }

    /// `place` stops waiting without a wake (its time is up, it was
    /// cancelled); false when a wake had already taken it out of line.
    pub fn leave(&mut self, place: u64) -> bool {
        self.sleeping.remove(&place).is_some()
    }

    /// Whether `place` holds a wake.
    pub fn holds(&self, place: u64) -> bool {
        self.held.contains_key(&place)
    }

    /// A permit was freed: the place woken for it, the first in line.
    pub fn wake_one(&mut self) -> Option<u64> {
        let (&place, _) = self.sleeping.first_key_value()?;
        self.releases += 1;
        let sleeper = self.sleeping.remove(&place).expect("the first in line");
        self.held.insert(place, Held { wish: sleeper.wish, release: self.releases, refused: Vec::new() });
        Some(place)
    }

    /// Anything may have become selectable: every place in line, woken.
    pub fn wake_all(&mut self) -> Vec<u64> {
        if self.sleeping.is_empty() {
            return Vec::new();
        }
        self.releases += 1;
        std::mem::take(&mut self.sleeping).into_keys().collect()
    }

    /// `place`'s try after its wake got its permit: the wake is used.
    pub fn granted(&mut self, place: u64) {
        self.held.remove(&place);
    }

    /// `place`'s try after its wake got nothing: the place its wake goes
    /// to, the first behind it that has not tried since the release and
    /// wishes for none of what was refused; `None` when it holds no wake or
    /// nobody is left.
    pub fn refused(&mut self, place: u64) -> Option<u64> {
        self.hand(place, true)
    }

    /// `place`'s acquire ended before it tried with its wake (cancelled,
    /// interrupted): the place the wake goes to, as for [`Self::refused`]
    /// but with nothing learnt of its wish.
    pub fn left(&mut self, place: u64) -> Option<u64> {
        self.hand(place, false)
    }

    fn hand(&mut self, place: u64, tried: bool) -> Option<u64> {
        let Held { wish, release, mut refused } = self.held.remove(&place)?;
        if tried {
            refused.push(wish);
        }
        let (&next, sleeper) = self
            .sleeping
            .range((Bound::Excluded(place), Bound::Unbounded))
            .find(|(_, s)| s.seen < release && !refused.contains(&s.wish))?;
        let wish = sleeper.wish;
        self.sleeping.remove(&next);
        self.held.insert(next, Held { wish, release, refused });
        Some(next)
    }

    /// How many wait.
    pub fn len(&self) -> usize {
        self.sleeping.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sleeping.is_empty()
    }
}

/// The holder's threads in line, each waiting on a bell of its own.
#[derive(Debug, Default)]
pub(crate) struct Line {
    state: Mutex<Threads>,
}

#[derive(Debug, Default)]
struct Threads {
    order: Order,
    bells: HashMap<u64, Arc<Bell>>,
}

impl Threads {
    /// Rings the bell of `place`, just woken: under the line's lock, so a
    /// thread that finds itself out of line finds its bell rung.
    fn ring(&mut self, place: u64) {
        if let Some(bell) = self.bells.remove(&place) {
            bell.ring();
        }
    }
}

/// What one thread waits on.
#[derive(Debug, Default)]
pub(crate) struct Bell {
    rung: Mutex<bool>,
    ringing: Condvar,
}

impl Bell {
    fn ring(&self) {
        *self.rung.lock().unwrap_or_else(|p| p.into_inner()) = true;
        self.ringing.notify_one();
    }
}

impl Line {
    fn state(&self) -> MutexGuard<'_, Threads> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A place in line for one acquire wishing `wish`.
    pub fn place(&self, wish: u64) -> Place<'_> {
        Place { line: self, place: self.state().order.place(), wish }
    }

    /// A permit was freed: the first in line is woken.
    pub fn wake_one(&self) {
        let mut s = self.state();
        if let Some(place) = s.order.wake_one() {
            s.ring(place);
        }
    }

    /// Anything may have become selectable: every waiter is woken.
    pub fn wake_all(&self) {
        let mut s = self.state();
        for place in s.order.wake_all() {
            s.ring(place);
        }
    }
}

/// One thread's place in line: a wake it could not use is handed on,
/// whether it tries again, gives up or is interrupted.
pub(crate) struct Place<'a> {
    line: &'a Line,
    place: u64,
    wish: u64,
}

impl Place<'_> {
    /// Joins the line: call with the pool's lock still held, so a release
    /// (which needs that lock) comes after and finds this waiter in line.
    pub fn lie_down(&mut self) -> Arc<Bell> {
        let mut s = self.line.state();
        let bell = Arc::new(Bell::default());
        s.order.lie_down(self.place, self.wish);
        s.bells.insert(self.place, bell.clone());
        bell
    }

    /// Waits on `bell` for `wait` at most; then out of line.
    pub fn sleep(&mut self, bell: &Bell, wait: Duration) {
        let rung = bell.rung.lock().unwrap_or_else(|p| p.into_inner());
        drop(bell.ringing.wait_timeout_while(rung, wait, |rung| !*rung).unwrap_or_else(|p| p.into_inner()));
        let mut s = self.line.state();
        s.order.leave(self.place);
        s.bells.remove(&self.place);
    }

    /// The try after the sleep got its permit: the wake is used.
    pub fn granted(&mut self) {
        self.line.state().order.granted(self.place);
    }

    /// The try after the sleep got nothing: the wake goes to the next in
    /// line that wishes otherwise.
    pub fn refused(&mut self) {
        let mut s = self.line.state();
        if let Some(next) = s.order.refused(self.place) {
            s.ring(next);
        }
    }
}

impl Drop for Place<'_> {
    /// An acquire that ends holding a wake it did not try (interrupted
    /// between waits) hands it on.
    fn drop(&mut self) {
        let mut s = self.line.state();
        if let Some(next) = s.order.left(self.place) {
            s.ring(next);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Places lying down in order with the given wishes.
    fn line(wishes: &[u64]) -> (Order, Vec<u64>) {
        let mut order = Order::default();
        let places = wishes
            .iter()
            .map(|&wish| {
                let place = order.place();
                order.lie_down(place, wish);
                place
            })
            .collect();
        (order, places)
    }

    #[test]
    fn a_release_wakes_the_first_in_line_alone() {
        let (mut order, p) = line(&[1, 1, 1]);
        assert_eq!(order.wake_one(), Some(p[0]));
        assert_eq!(order.len(), 2, "the others sleep on");
        order.granted(p[0]);
        assert_eq!(order.refused(p[0]), None, "a used wake is not handed on");
        assert_eq!(order.wake_one(), Some(p[1]));
        assert_eq!(order.wake_all(), [p[2]]);
        assert!(order.is_empty());
    }

    #[test]
    fn a_refused_wake_goes_to_the_next_that_wishes_otherwise() {
        let (mut order, p) = line(&[7, 7, 8, 7]);
        assert_eq!(order.wake_one(), Some(p[0]));
        // The second asks as the first did and would be refused alike.
        assert_eq!(order.refused(p[0]), Some(p[2]));
        assert!(order.holds(p[2]));
        assert_eq!(order.refused(p[2]), None, "nobody left wishes otherwise");
        assert_eq!(order.len(), 2);
    }

    #[test]
    fn a_wake_left_untried_goes_to_the_next_whatever_it_wishes() {
        let (mut order, p) = line(&[7, 7]);
        assert_eq!(order.wake_one(), Some(p[0]));
        assert_eq!(order.left(p[0]), Some(p[1]), "the first never asked");
        assert_eq!(order.left(p[1]), None);
    }

    #[test]
    fn a_waiter_that_tried_since_the_release_is_not_woken_for_it() {
        let (mut order, p) = line(&[1]);
        assert_eq!(order.wake_one(), Some(p[0]));
        let later = order.place();
        order.lie_down(later, 2); // it tried after the release
        assert_eq!(order.refused(p[0]), None);
        assert!(order.leave(later));
        assert!(!order.leave(later));
    }

    #[test]
    fn a_thread_in_line_is_woken_by_a_release_and_hands_on_what_it_cannot_use() {
        let line = Arc::new(Line::default());
        let (tx, rx) = std::sync::mpsc::channel();
        for (i, wish) in [(0, 5), (1, 5), (2, 6)] {
            let (line, tx) = (line.clone(), tx.clone());
            let lying = Arc::new(std::sync::Barrier::new(2));
            let lain = lying.clone();
            std::thread::spawn(move || {
                let mut place = line.place(wish);
                let bell = place.lie_down();
                lain.wait();
                place.sleep(&bell, Duration::from_secs(60));
                tx.send(i).unwrap();
                // The first tried and could not use the permit; the third could.
                match i {
                    0 => place.refused(),
                    2 => place.granted(),
                    _ => {}
                }
            });
            lying.wait();
        }
        // A wake that never comes fails the test instead of hanging it.
        let next = || rx.recv_timeout(Duration::from_secs(60)).expect("a waiter woken");
        line.wake_one();
        assert_eq!(next(), 0);
        assert_eq!(next(), 2, "handed past the one that wishes alike");
        assert_eq!(line.state().order.len(), 1);
        line.wake_all();
        assert_eq!(next(), 1);
    }
}
