//! Tenant ownership in sharded mode: which tenants this process may serve.
//!
//! A tenant is served only while its owner lease (a row in PostgreSQL or a
//! key in etcd, expiry on that store's clock) is held *and* the local
//! deadline — send time of the last successful claim or renewal + TTL −
//! margin — has not passed. The deadline is judged on this process's
//! monotonic clock, so a process that was paused or cut off stops serving
//! before the coordination store can hand the tenant to another (I7); every
//! write it still makes carries its epoch and is refused by the database
//! once the epoch moved on (I3).

use std::collections::HashMap;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::error::{Error, Result};
use crate::providers::{Claim, OwnerStore};

#[derive(Debug, Clone, Copy)]
struct Held {
    epoch: u64,
    deadline: Instant,
}

/// What a request for a tenant may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    /// This process owns the tenant and has it open.
    Serving { epoch: u64 },
    /// Just taken (first use, or from an owner that let it expire): open the
    /// tenant from its checkpoint and log, writing under `epoch`.
    Claimed { epoch: u64 },
}

/// This process's owner leases.
#[derive(Debug)]
pub struct Ownership {
    owners: Mutex<Box<dyn OwnerStore>>,
    /// Unique to this process start, so a restarted process never mistakes
    /// its predecessor's lease for its own.
    me: String,
    address: String,
    ttl: Duration,
    held: Mutex<HashMap<String, Held>>,
    /// Tenants handed to another process, by its address, and until when
    /// requests for them are sent there rather than claimed here.
    handed: Mutex<HashMap<String, (String, Instant)>>,
}

fn guard<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Ownership {
    /// Owner leases kept in `owners`. `address` is where other processes
    /// send clients that reach this one with a tenant it does not own; `ttl`
    /// is the owner lease length.
    pub fn new(owners: Box<dyn OwnerStore>, address: &str, ttl: Duration) -> Ownership {
        let started = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        Ownership {
            owners: Mutex::new(owners),
            me: format!("{address}#{}-{started:x}", std::process::id()),
            address: address.to_owned(),
            ttl,
            held: Mutex::new(HashMap::new()),
            handed: Mutex::new(HashMap::new()),
        }
    }

    /// Whether this process may serve `tenant` now, claiming it if nobody
    /// holds it (or re-taking it under a new epoch once its local deadline
    /// passed: `Claimed` tells the caller to reopen it). `Err(NotOwner)`
    /// names the owner's address.
    pub fn check(&self, tenant: &str) -> Result<Standing> {
        if let Ok(epoch) = self.serving(tenant) {
            return Ok(Standing::Serving { epoch });
        }
        if let Some(to) = self.handed_to(tenant) {
            return Err(Error::NotOwner { owner: to });
        }
        // One claim at a time: a request that waited here finds the tenant
        // its neighbour just took, rather than claiming against itself.
        let mut owners = guard(&self.owners);
        if let Ok(epoch) = self.serving(tenant) {
            return Ok(Standing::Serving { epoch });
        }
        // The outcome is recorded before the claim lock is let go, so the
        // next request in line sees it instead of claiming again.
        match owners.claim(tenant, &self.me, &self.address, self.ttl)? {
            Claim::Owned { epoch, deadline } => {
                guard(&self.held).insert(tenant.to_owned(), Held { epoch, deadline });
                Ok(Standing::Claimed { epoch })
            }
            Claim::Elsewhere { address, .. } => {
                // Only a lapsed record is dropped: one still within its
                // deadline is this process's own, whatever a store says.
                let mut held = guard(&self.held);
                if held.get(tenant).is_some_and(|h| Instant::now() >= h.deadline) {
                    held.remove(tenant);
                }
                Err(Error::NotOwner { owner: address })
            }
        }
    }

    /// The epoch `tenant` is served under, if this process holds it and its
    /// local deadline has not passed; never claims. For embedded pools,
    /// which do not reopen a tenant they lost.
    pub fn serving(&self, tenant: &str) -> Result<u64> {
        match guard(&self.held).get(tenant) {
            Some(h) if Instant::now() < h.deadline => Ok(h.epoch),
            _ => Err(Error::NotOwner { owner: "lost: this process's owner lease ran out".into() }),
        }
    }

    /// Renews every held lease every quarter TTL on a thread of its own,
    /// until the returned keeper is dropped.
    pub fn keep(self: &Arc<Self>) -> Keeper {
        let (stop, stopped) = mpsc::channel::<()>();
        let ownership = self.clone();
        let period = self.ttl / 4;
        let thread = std::thread::Builder::new()
            .name("repute-owner".into())
            .spawn(move || loop {
                match stopped.recv_timeout(period) {
                    Err(RecvTimeoutError::Timeout) => {
                        ownership.renew();
                    }
                    _ => return,
                }
            })
            .ok();
        Keeper { stop: Some(stop), thread }
    }

    /// Renews every held lease; returns the tenants this process lost (the
    /// database gave them away, or the local deadline passed before a
    /// renewal got through). The caller stops serving them.
    pub fn renew(&self) -> Vec<String> {
        let held: Vec<(String, Held)> = guard(&self.held).iter().map(|(t, h)| (t.clone(), *h)).collect();
        let mut lost = Vec::new();
        for (tenant, h) in held {
            let renewed = guard(&self.owners).renew(&tenant, &self.me, h.epoch, self.ttl);
            let mut held = guard(&self.held);
            match renewed {
                Ok(Some(deadline)) => {
                    if let Some(entry) = held.get_mut(&tenant).filter(|e| e.epoch == h.epoch) {
                        entry.deadline = deadline;
                    }
                }
                Ok(None) => {
                    held.remove(&tenant);
                    lost.push(tenant);
                }
                Err(_) if Instant::now() >= h.deadline => {
                    held.remove(&tenant);
                    lost.push(tenant);
                }
                Err(_) => {}
            }
        }
        lost
    }

    /// Tenants this process was turned away from whose owner has let go
    /// since (as far as the store can tell without being asked): claim them
    /// with [`Ownership::check`] now, so a takeover need not wait for the
    /// next request.
    pub fn vacated(&self) -> Vec<String> {
        guard(&self.owners).vacated()
    }

    /// The address of the process that serves `tenant` now: this one's
    /// while it holds it, the one it was handed to, else the store's
    /// record; `None` while nobody does.
    pub fn owner_of(&self, tenant: &str) -> Result<Option<String>> {
        if self.serving(tenant).is_ok() {
            return Ok(Some(self.address.clone()));
        }
        if let Some(to) = self.handed_to(tenant) {
            return Ok(Some(to));
        }
        Ok(guard(&self.owners).owner(tenant)?)
    }

    /// Gives `tenant` up at once (the caller saved its last checkpoint) and,
    /// for one owner TTL, answers its requests "not owner" naming `to`
    /// instead of claiming it again, so the next request goes there and
    /// that process claims it.
    pub fn hand_off(&self, tenant: &str, to: &str) {
        if let Some(h) = guard(&self.held).remove(tenant) {
            let _ = guard(&self.owners).resign(tenant, &self.me, h.epoch);
        }
        guard(&self.handed).insert(tenant.to_owned(), (to.to_owned(), Instant::now() + self.ttl));
    }

    fn handed_to(&self, tenant: &str) -> Option<String> {
        let mut handed = guard(&self.handed);
        let now = Instant::now();
        handed.retain(|_, (_, until)| now < *until);
        handed.get(tenant).map(|(to, _)| to.clone())
    }

    /// Gives every tenant up at once (graceful shutdown, after the last checkpoint).
    pub fn resign_all(&self) {
        let held: Vec<(String, Held)> = guard(&self.held).drain().collect();
        let mut owners = guard(&self.owners);
        for (tenant, h) in held {
            let _ = owners.resign(&tenant, &self.me, h.epoch);
        }
    }
}

/// The renewal thread of [`Ownership::keep`]; dropping it stops renewing.
#[derive(Debug)]
pub struct Keeper {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for Keeper {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
