//! The pool's watcher: one thread per pool, started when the first lease
//! is auto-renewed or listened to and gone when none is left. It renews
//! auto-renewed leases at a third of their TTL and notices losses (a
//! deadline passed, `max_hold` reached, the pool closed) with no call from
//! the holder, so no front end runs a thread or timer per lease.

use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::Duration;

use super::{HeldLease, Holder};

/// The longest sleep on a clock that follows real time: a lease added
/// meanwhile wakes the thread anyway; this only bounds a missed wakeup.
pub(super) const MAX_SLEEP: Duration = Duration::from_secs(1);
/// A `ManualClock` moves without telling anyone: look this often.
pub(super) const MANUAL_POLL: Duration = Duration::from_millis(5);

#[derive(Default)]
struct List {
    leases: Vec<Weak<HeldLease>>,
    running: bool,
    closed: bool,
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
        if !list.leases.iter().any(|l| l.ptr_eq(&weak)) {
            list.leases.push(weak);
        }
        if !list.running {
            list.running = true;
            let holder = Arc::downgrade(holder);
            std::thread::Builder::new()
                .name("repute-watch".into())
                .spawn(move || run(holder))
                .expect("spawning the lease watcher");
        }
        self.wake.notify_all();
    }

    /// Wakes the thread for a last round: every lease it watches is lost.
    pub(super) fn close(&self) {
        self.list().closed = true;
        self.wake.notify_all();
    }
}

fn run(holder: Weak<Holder>) {
    loop {
        let Some(holder) = holder.upgrade() else { return };
        let leases: Vec<Arc<HeldLease>> = {
            let mut list = holder.watch.list();
            list.leases.retain(|l| l.strong_count() > 0);
            let leases: Vec<_> = list.leases.iter().filter_map(Weak::upgrade).collect();
            if leases.is_empty() {
                list.running = false;
                return;
            }
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
        let mut list = holder.watch.list();
        list.leases.retain(|l| !done.iter().any(|d| d.ptr_eq(l)));
        if list.closed && list.leases.is_empty() {
            list.running = false;
            return;
        }
        let sleep =
            next.map_or(holder.poll(), |at| Duration::from_nanos(at.saturating_sub(holder.now()))).min(holder.poll());
        if sleep > Duration::ZERO {
            drop(holder.watch.wake.wait_timeout(list, sleep).unwrap_or_else(|p| p.into_inner()));
        }
    }
}
