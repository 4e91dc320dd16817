//! The pool's watcher: one thread per pool, started when the first lease
//! is auto-renewed or listened to and gone when none is left. It renews
//! auto-renewed leases at a third of their TTL and notices losses (a
//! deadline passed, `max_hold` reached, the pool closed) with no call from
//! the holder, so no front end runs a thread or timer per lease. With
//! nothing to watch it waits [`IDLE`] for the next lease before it ends, so
//! a pool that leases one request at a time (an adapter's attempts) does
//! not start a thread per request.

use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::Duration;

use super::{HeldLease, Holder};

/// The longest sleep on a clock that follows real time: a lease added
/// meanwhile wakes the thread anyway; this only bounds a missed wakeup.
pub(super) const MAX_SLEEP: Duration = Duration::from_secs(1);
/// A `ManualClock` moves without telling anyone: look this often.
pub(super) const MANUAL_POLL: Duration = Duration::from_millis(5);
/// How long the thread waits for a lease when it has none left.
const IDLE: Duration = Duration::from_secs(2);

#[derive(Default)]
struct List {
    leases: Vec<Weak<HeldLease>>,
    running: bool,
    closed: bool,
    /// Until when the thread sleeps (pool clock), while it does: a lease
    /// due later needs no wakeup, which keeps one wakeup per attempt off
    /// an adapter's path.
    asleep_until: Option<u64>,
    /// A lease came while the thread was awake: it looks again before it sleeps.
    added: bool,
}

#[derive(Default)]
pub(super) struct Watch {
    list: Mutex<List>,
    wake: Condvar,
}

impl Watch {
    fn list(&self) -> std::sync::MutexGuard<'_, List> {
        self.list.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Watches `lease` from now on, starting the thread if it is not running.
    pub(super) fn add(&self, holder: &Arc<Holder>, lease: &Arc<HeldLease>) {
        let mut list = self.list();
        let weak = Arc::downgrade(lease);
        // Leases dropped since the thread's last round go now: its rounds
        // can be a second apart, and an adapter adds a lease per request,
        // so the list would hold (and each add scan) a second of requests.
        list.leases.retain(|l| l.strong_count() > 0 && !l.ptr_eq(&weak));
        list.leases.push(weak);
        if list.running {
            match list.asleep_until {
                None => list.added = true,
                Some(until) if lease.due() < until => self.wake.notify_all(),
                Some(_) => {}
            }
        } else {
            list.running = true;
            let (holder, watch) = (Arc::downgrade(holder), holder.watch.clone());
            std::thread::Builder::new()
                .name("repute-watch".into())
                .spawn(move || run(holder, &watch))
                .expect("spawning the lease watcher");
        }
    }

    /// How many leases the list holds, dropped ones not yet swept included.
    #[cfg(test)]
    pub(super) fn held(&self) -> usize {
        self.list().leases.len()
    }

    /// Wakes the thread for a last round: every lease it watches is lost.
    pub(super) fn close(&self) {
        self.list().closed = true;
        self.wake.notify_all();
    }
}

fn run(holder: Weak<Holder>, watch: &Watch) {
    let mut idled = false;
    loop {
        let Some(holder) = holder.upgrade() else { return };
        let leases: Vec<Arc<HeldLease>> = {
            let mut list = watch.list();
            list.leases.retain(|l| l.strong_count() > 0);
            let leases: Vec<_> = list.leases.iter().filter_map(Weak::upgrade).collect();
            list.added = false;
            if leases.is_empty() {
                if idled || list.closed {
                    list.running = false;
                    return;
                }
                idled = true;
                let idle = IDLE.min(holder.poll());
                list.asleep_until = Some(holder.now().saturating_add(idle.as_nanos() as u64));
                // Without the pool: one dropped meanwhile is not kept alive.
                drop(holder);
                let mut list = watch.wake.wait_timeout(list, idle).unwrap_or_else(|p| p.into_inner()).0;
                list.asleep_until = None;
                continue;
            }
            idled = false;
            leases
        };
        let now = holder.now();
        let mut next = None::<u64>;
        let mut done = Vec::new();
        for lease in &leases {
            match lease.tend(now) {
                Some(at) => next = Some(next.map_or(at, |n| n.min(at))),
                None => done.push(Arc::downgrade(lease)),
            }
        }
        drop(leases);
        let mut list = watch.list();
        list.leases.retain(|l| !done.iter().any(|d| d.ptr_eq(l)));
        if list.closed && list.leases.is_empty() {
            list.running = false;
            return;
        }
        let sleep =
            next.map_or(holder.poll(), |at| Duration::from_nanos(at.saturating_sub(holder.now()))).min(holder.poll());
        if std::mem::take(&mut list.added) {
            continue;
        }
        if sleep > Duration::ZERO {
            list.asleep_until = Some(holder.now().saturating_add(sleep.as_nanos() as u64));
            let mut list = watch.wake.wait_timeout(list, sleep).unwrap_or_else(|p| p.into_inner()).0;
            list.asleep_until = None;
        }
    }
}
