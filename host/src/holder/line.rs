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
//! wakes no one: the waiting plan's backoff bounds that wait. The asyncio
//! and Node forms of this line live in their bindings (`repute/_freed.py`,
//! `lib/line.js`).

use std::collections::BTreeMap;
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

#[derive(Debug, Default)]
pub(crate) struct Line {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    places: u64,
    /// Wakes made, counted.
    releases: u64,
    sleeping: BTreeMap<u64, Sleeper>,
}

#[derive(Debug)]
struct Sleeper {
    /// The last wake this waiter tried after: one it need not be woken for.
    seen: u64,
    wish: u64,
    signal: Arc<Signal>,
}

/// One waiter's bell.
#[derive(Debug, Default)]
struct Signal {
    woken: Mutex<Option<Woken>>,
    rung: Condvar,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Woken {
    /// A release's wake, handed down the line while it is refused.
    Release(Wake),
    /// A change that may free many: nothing to hand on.
    All,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Wake {
    release: u64,
    /// What the waiters it woke wished for and were refused.
    refused: Vec<u64>,
}

impl Line {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A place in line for one acquire wishing `wish`, behind every one
    /// before it.
    pub fn place(&self, wish: u64) -> Place<'_> {
        let mut s = self.state();
        s.places += 1;
        Place { line: self, place: s.places, wish, wake: None }
    }

    /// A permit was freed: the first in line that may use it is woken.
    pub fn wake_one(&self) {
        let mut s = self.state();
        if s.sleeping.is_empty() {
            return;
        }
        s.releases += 1;
        let wake = Wake { release: s.releases, refused: Vec::new() };
        s.hand(wake, 0);
    }

    /// Anything may have become selectable: every waiter is woken.
    pub fn wake_all(&self) {
        let mut s = self.state();
        if s.sleeping.is_empty() {
            return;
        }
        s.releases += 1;
        for (_, sleeper) in std::mem::take(&mut s.sleeping) {
            sleeper.signal.ring(Woken::All);
        }
    }
}

impl State {
    /// Wakes the first waiter behind place `after` that may use what `wake`
    /// freed; none: every one has tried since, or wishes for what was
    /// refused.
    fn hand(&mut self, wake: Wake, after: u64) {
        let found = self
            .sleeping
            .range((Bound::Excluded(after), Bound::Unbounded))
            .find(|(_, s)| s.seen < wake.release && !wake.refused.contains(&s.wish))
            .map(|(&place, _)| place);
        if let Some(sleeper) = found.and_then(|place| self.sleeping.remove(&place)) {
            // Rung under the line's lock: a waiter that finds itself out of
            // line finds its bell rung.
            sleeper.signal.ring(Woken::Release(wake));
        }
    }
}

impl Signal {
    fn ring(&self, woken: Woken) {
        *self.woken.lock().unwrap_or_else(|p| p.into_inner()) = Some(woken);
        self.rung.notify_one();
    }
}

/// One acquire's place in line, and the wake it holds: a wake it could not
/// use is handed on, whether it tries again, gives up or unwinds.
pub(crate) struct Place<'a> {
    line: &'a Line,
    place: u64,
    wish: u64,
    wake: Option<Wake>,
}

impl Place<'_> {
    /// Joins the line: call with the pool's lock still held, so a release
    /// (which needs that lock) comes after and finds this waiter in line.
    pub fn lie_down(&mut self) -> Bell {
        let mut s = self.line.state();
        let signal = Arc::new(Signal::default());
        let sleeper = Sleeper { seen: s.releases, wish: self.wish, signal: signal.clone() };
        s.sleeping.insert(self.place, sleeper);
        Bell { signal }
    }

    /// Waits on `bell` for `wait` at most; then out of line, holding the
    /// release's wake if one ended the wait.
    pub fn sleep(&mut self, bell: Bell, wait: Duration) {
        let woken = bell.signal.woken.lock().unwrap_or_else(|p| p.into_inner());
        let (mut woken, _) =
            bell.signal.rung.wait_timeout_while(woken, wait, |w| w.is_none()).unwrap_or_else(|p| p.into_inner());
        let mut rung = woken.take();
        drop(woken);
        let mut s = self.line.state();
        if s.sleeping.remove(&self.place).is_none() && rung.is_none() {
            // Woken between the timeout and this lock.
            rung = bell.signal.woken.lock().unwrap_or_else(|p| p.into_inner()).take();
        }
        drop(s);
        self.wake = match rung {
            Some(Woken::Release(wake)) => Some(wake),
            Some(Woken::All) | None => None,
        };
    }

    /// The try after the sleep got its permit: the wake is used.
    pub fn granted(&mut self) {
        self.wake = None;
    }

    /// The try after the sleep got nothing, or the acquire ends without a
    /// permit: the wake goes to the next in line that wishes otherwise.
    pub fn refused(&mut self) {
        if let Some(mut wake) = self.wake.take() {
            wake.refused.push(self.wish);
            self.line.state().hand(wake, self.place);
        }
    }
}

impl Drop for Place<'_> {
    fn drop(&mut self) {
        self.refused();
    }
}

/// What a waiter in line waits on.
pub(crate) struct Bell {
    signal: Arc<Signal>,
}

#[cfg(test)]
mod tests {
    use super::*;

    const LONG: Duration = Duration::from_secs(60);

    /// Waiters lying down in order, each on its own thread, each granted
    /// what woke it: which woke and whether by a release's wake comes back.
    fn waiters(line: &Arc<Line>, wishes: &[u64]) -> std::sync::mpsc::Receiver<(usize, bool)> {
        let (tx, rx) = std::sync::mpsc::channel();
        for (i, &wish) in wishes.iter().enumerate() {
            let (line, tx) = (line.clone(), tx.clone());
            let lying = Arc::new(std::sync::Barrier::new(2));
            let down = lying.clone();
            std::thread::spawn(move || {
                let mut place = line.place(wish);
                let bell = place.lie_down();
                down.wait();
                place.sleep(bell, LONG);
                tx.send((i, place.wake.is_some())).unwrap();
                place.granted();
            });
            lying.wait();
        }
        rx
    }

    fn in_line(line: &Line) -> usize {
        line.state().sleeping.len()
    }

    #[test]
    fn a_release_wakes_the_first_in_line_alone() {
        let line = Arc::new(Line::default());
        let woken = waiters(&line, &[1, 1, 1]);
        line.wake_one();
        assert_eq!(woken.recv().unwrap(), (0, true));
        assert_eq!(in_line(&line), 2, "the others sleep on");
        line.wake_one();
        assert_eq!(woken.recv().unwrap(), (1, true));
        line.wake_all();
        assert_eq!(woken.recv().unwrap(), (2, false));
        assert_eq!(in_line(&line), 0);
    }

    #[test]
    fn a_refused_wake_goes_to_the_next_that_wishes_otherwise() {
        let line = Line::default();
        let mut first = line.place(7);
        let first_bell = first.lie_down();
        let mut alike = line.place(7);
        let _alike_bell = alike.lie_down();
        let mut other = line.place(8);
        let other_bell = other.lie_down();
        line.wake_one();
        first.sleep(first_bell, Duration::ZERO);
        assert!(first.wake.is_some(), "the first in line holds the wake");
        first.refused();
        // The second asks alike and would be refused alike: the third is woken.
        other.sleep(other_bell, Duration::ZERO);
        assert_eq!(other.wake.as_ref().map(|w| w.refused.clone()), Some(vec![7]));
        assert_eq!(in_line(&line), 1, "the one that wishes alike sleeps on");
        drop(other); // refused again, or gone: nobody else wishes otherwise
        assert_eq!(in_line(&line), 1);
    }

    #[test]
    fn a_waiter_that_tried_since_the_release_is_not_woken_for_it() {
        let line = Line::default();
        let mut first = line.place(1);
        let bell = first.lie_down();
        line.wake_one();
        first.sleep(bell, Duration::ZERO);
        let mut later = line.place(2);
        let later_bell = later.lie_down(); // it tried after the release
        drop(first); // refused: hands the wake on
        later.sleep(later_bell, Duration::ZERO);
        assert_eq!(later.wake, None);
    }
}
