//! One log, one state (I8): pools that share a log and a lease authority,
//! as the processes of a shared tenant do, fold every change to the same
//! registrations, whatever each of them holds when it folds; a change that
//! would take away a permit held in another pool is refused before it is
//! logged, by the authority's count.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::common::*;
use proptest::prelude::*;
use repute_core::journal::{Checkpoint, Storage};
use repute_core::{
    Authority, Command, Error, GrantAnswer, GrantRequest, GroupLimits, GroupName, Journal, Labels, Limits, Policy,
    Pool, ResourceId, Strategy as Pick,
};

/// The processes' clock: one reading for every pool of a test.
#[derive(Debug, Clone, Default)]
struct Clock(Arc<AtomicU64>);

impl Clock {
    fn now(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }

    fn advance(&self, by: u64) {
        self.0.fetch_add(by, Ordering::SeqCst);
    }
}

/// The log every pool appends to and folds, and the position of its last
/// entry that changes what grants are judged against.
#[derive(Debug, Clone, Default)]
struct Log {
    entries: Arc<Mutex<Vec<Command>>>,
    changed: Arc<AtomicU64>,
    clock: Clock,
}

impl Log {
    /// Appends as another writer does once its check passed.
    fn push(&self, entry: Command) {
        let mut entries = self.entries.lock().unwrap();
        let changes = entry.changes_grants();
        entries.push(entry);
        if changes {
            self.changed.store(entries.len() as u64, Ordering::SeqCst);
        }
    }
}

impl Storage for Log {
    type Entry = Command;
    type Error = ();

    fn now(&mut self) -> u64 {
        self.clock.now()
    }

    fn load(&mut self) -> Result<Option<Checkpoint>, ()> {
        Ok(None)
    }

    fn save(&mut self, _: &[u8], _: u64, _: u64) -> Result<u64, ()> {
        Err(())
    }

    fn append(&mut self, entry: Command) -> Result<u64, ()> {
        self.push(entry);
        Ok(self.entries.lock().unwrap().len() as u64)
    }

    fn read_log(&mut self, after: u64, limit: u32) -> Result<Vec<(u64, Option<Command>)>, ()> {
        let entries = self.entries.lock().unwrap();
        let page = entries.iter().enumerate().skip(after as usize).take(limit as usize);
        Ok(page.map(|(i, c)| (i as u64 + 1, Some(c.clone()))).collect())
    }
}

/// The newest token of each permit and until when its lease holds it.
type Permits = HashMap<(ResourceId, u32), (u64, u64)>;

/// A lease authority every pool shares, as a shared store is: it counts
/// the grants of each group the grant's claim names, and refuses a grant
/// judged on a view of the log behind its last change of what grants are
/// judged against.
#[derive(Debug, Clone, Default)]
struct Shared {
    permits: Arc<Mutex<Permits>>,
    groups: Arc<Mutex<HashMap<String, u32>>>,
    changed: Arc<AtomicU64>,
    clock: Clock,
}

impl Authority for Shared {
    fn grant(&mut self, resource: &ResourceId, permit: u32, grant: GrantRequest<'_>) -> GrantAnswer {
        if grant.view < self.changed.load(Ordering::SeqCst) {
            return GrantAnswer::Stale;
        }
        let GrantRequest { ttl, last, claim, .. } = grant;
        let now = self.clock.now();
        let mut groups = self.groups.lock().unwrap();
        for (i, g) in claim.map_or(&[][..], |c| &c.groups[..]).iter().enumerate() {
            let rpm = g.limits.rpm.unwrap_or(u32::MAX);
            if groups.get(g.name.as_str()).copied().unwrap_or(0) >= rpm {
                return GrantAnswer::GroupLimited(i as u32, 60 * S);
            }
        }
        let mut permits = self.permits.lock().unwrap();
        let (token, until) = permits.entry((resource.clone(), permit)).or_default();
        if *until > now {
            return GrantAnswer::Held;
        }
        *token = (*token).max(last) + 1;
        *until = now + ttl;
        for g in claim.map_or(&[][..], |c| &c.groups[..]) {
            *groups.entry(g.name.as_str().to_owned()).or_default() += 1;
        }
        GrantAnswer::Granted(*token)
    }

    fn extend(&mut self, resource: &ResourceId, permit: u32, token: u64, ttl: u64) -> bool {
        let now = self.clock.now();
        match self.permits.lock().unwrap().get_mut(&(resource.clone(), permit)) {
            Some((held, until)) if *held == token && *until > now => {
                *until = now + ttl;
                true
            }
            _ => false,
        }
    }

    fn revoke(&mut self, resource: &ResourceId, permit: u32, token: u64) {
        if let Some((held, until)) = self.permits.lock().unwrap().get_mut(&(resource.clone(), permit)) {
            if *held == token {
                *until = 0;
            }
        }
    }

    fn live(&mut self, resource: &ResourceId, first: u32, permits: u32) -> u32 {
        let now = self.clock.now();
        let table = self.permits.lock().unwrap();
        (first..permits).filter(|&p| table.get(&(resource.clone(), p)).is_some_and(|&(_, until)| until > now)).count()
            as u32
    }
}

/// Pools of one tenant, as its processes: one log, one authority, one clock.
struct Tenant {
    log: Log,
    authority: Shared,
}

impl Tenant {
    fn new() -> Tenant {
        let clock = Clock::default();
        clock.advance(S);
        let changed = Arc::new(AtomicU64::new(0));
        Tenant {
            log: Log { entries: Arc::default(), changed: changed.clone(), clock: clock.clone() },
            authority: Shared { permits: Arc::default(), groups: Arc::default(), changed, clock },
        }
    }

    /// A process opening the tenant: the log folded from its start.
    fn open(&self) -> Journal<Log> {
        let authority = self.authority.clone();
        let policy = Policy { strategy: Pick::First, ..Policy::default() };
        Journal::open(policy, 7, true, self.log.clone(), move |p: &mut Pool, _: &mut Log| {
            p.set_authority(Box::new(authority))
        })
        .unwrap()
    }
}

fn register(resource: &ResourceId, permits: u32, groups: &[&str]) -> Command {
    Command::Register {
        resource: resource.clone(),
        permits,
        limits: Limits::default(),
        labels: Labels::default(),
        secret: None,
        groups: groups.iter().map(|g| GroupName::new(*g).unwrap()).collect(),
    }
}

fn change(journal: &mut Journal<Log>, command: Command) -> Result<bool, Error> {
    let entry = command.clone();
    journal.logged(move || entry, &command).map_err(|e| match e {
        repute_core::journal::JournalError::Pool(e) => e,
        repute_core::journal::JournalError::Storage(()) => panic!("the test log refused"),
    })
}

/// What every process derives from the log alone, in a form two pools
/// compare by: each registration's permits, labels, limits and groups, and
/// each group's limits. Reputation and leases are left out: a report's
/// cooldown runs on each process's clock, leases are each process's own.
fn registrations(pool: &Pool) -> Vec<String> {
    let mut out: Vec<String> = pool
        .resources()
        .iter()
        .map(|r| format!("{} {} {:?} {:?} {:?}", r.resource, r.permits, r.labels, r.limits, r.groups))
        .collect();
    out.extend(pool.groups(0).iter().map(|g| format!("group {} {:?}", g.name, g.limits)));
    out
}

#[test]
fn a_regroup_while_another_process_holds_the_key_is_refused_and_logged_nowhere() {
    let tenant = Tenant::new();
    let (mut s1, mut s2) = (tenant.open(), tenant.open());
    let g2 = GroupLimits { rpm: Some(3), ..GroupLimits::default() };
    change(&mut s1, Command::SetGroup { name: GroupName::new("g2").unwrap(), limits: g2 }).unwrap();
    let k1 = rid("k1");
    change(&mut s1, register(&k1, 1, &["g1"])).unwrap();
    let lease = s1.run(|p, now| p.acquire(&ctx("c"), now)).unwrap();
    let logged = tenant.log.entries.lock().unwrap().len();

    // At the other process: the authority counts S1's lease.
    assert_eq!(change(&mut s2, register(&k1, 1, &["g2"])), Err(Error::Leased { live: 1 }));
    assert_eq!(
        change(&mut s2, Command::Unregister { resource: k1.clone(), force: false }),
        Err(Error::Leased { live: 1 })
    );
    // At the holder: its own lease.
    assert_eq!(change(&mut s1, register(&k1, 1, &["g2"])), Err(Error::Leased { live: 1 }));
    assert_eq!(tenant.log.entries.lock().unwrap().len(), logged, "a refused change is not logged");

    s1.run(|p, now| p.release(lease.id, lease.token, now)).unwrap();
    assert_eq!(change(&mut s2, register(&k1, 1, &["g2"])), Ok(true));
    s1.fold(None).unwrap();
    let fresh = tenant.open();
    for pool in [s1.pool(), s2.pool(), fresh.pool()] {
        assert_eq!(pool.resources()[0].groups, vec![GroupName::new("g2").unwrap()]);
        assert_eq!(registrations(pool), registrations(s2.pool()));
        assert_eq!(pool.refused_entries(), 0);
    }
}

#[test]
fn a_change_logged_while_this_process_holds_the_key_applies_here_too() {
    // A grant can land between another writer's check at the authority and
    // its append: the fold applies the change all the same.
    let tenant = Tenant::new();
    let (mut s1, mut s2) = (tenant.open(), tenant.open());
    let (k1, k2) = (rid("k1"), rid("k2"));
    change(&mut s1, register(&k1, 2, &["g1"])).unwrap();
    change(&mut s1, register(&k2, 1, &["g1"])).unwrap();
    s2.fold(None).unwrap();
    let held = s1.run(|p, now| p.acquire(&ctx("c"), now)).unwrap();
    let held2 = s1.run(|p, now| p.acquire(&ctx("c"), now)).unwrap();
    assert_eq!((held.resource.clone(), held2.resource.clone()), (k1.clone(), k1.clone()));
    let other = s1.run(|p, now| p.acquire(&ctx("c"), now)).unwrap();
    assert_eq!(other.resource, k2);
    assert_eq!(s1.pool().groups(0)[0].leased, 3);

    // Entries as another writer logs them once its check passed.
    tenant.log.push(register(&k1, 1, &["g2"]));
    s1.fold(None).unwrap();
    let groups = s1.pool().groups(0);
    assert_eq!((groups[0].leased, groups[1].leased), (1, 1), "the kept lease moved with k1, the other ended");
    let (kept, removed) = if held.permit == 0 { (&held, &held2) } else { (&held2, &held) };
    assert!(s1.run(|p, now| p.lease(kept.id, now)).is_some());
    assert!(s1.run(|p, now| p.lease(removed.id, now)).is_none(), "the lease of a permit taken away ends");
    tenant.log.push(Command::Unregister { resource: k2.clone(), force: false });
    s1.fold(None).unwrap();
    assert_eq!(s1.run(|p, now| p.release(other.id, other.token, now)), Err(Error::UnknownLease));
    assert_eq!(tenant.authority.clone().live(&k2, 0, 1), 0, "the lease of a removed key is revoked");

    s2.fold(None).unwrap();
    let fresh = tenant.open();
    for pool in [s1.pool(), s2.pool(), fresh.pool()] {
        assert_eq!(registrations(pool), registrations(fresh.pool()));
        assert_eq!(pool.refused_entries(), 0);
    }
}

#[test]
fn an_entry_that_cannot_apply_is_refused_and_counted_alike_everywhere() {
    let tenant = Tenant::new();
    let (mut s1, mut s2) = (tenant.open(), tenant.open());
    let k1 = rid("k1");
    change(&mut s1, register(&k1, 1, &[])).unwrap();
    s2.fold(None).unwrap();
    // Two writers remove k1 at once: the second entry finds it gone.
    tenant.log.push(Command::Unregister { resource: k1.clone(), force: false });
    tenant.log.push(Command::Unregister { resource: k1, force: false });
    s1.fold(None).unwrap();
    s2.fold(None).unwrap();
    let fresh = tenant.open();
    for pool in [s1.pool(), s2.pool(), fresh.pool()] {
        assert_eq!(pool.resources().len(), 0);
        assert_eq!(pool.refused_entries(), 1);
    }
}

#[test]
fn a_change_that_changes_nothing_is_not_logged() {
    let tenant = Tenant::new();
    let mut s1 = tenant.open();
    let k1 = rid("k1");
    assert_eq!(change(&mut s1, register(&k1, 1, &["g1"])), Ok(true));
    assert_eq!(change(&mut s1, register(&k1, 1, &["g1"])), Ok(false));
    assert_eq!(tenant.log.entries.lock().unwrap().len(), 1);
}

/// One step of a process of the tenant.
#[derive(Debug, Clone)]
enum Step {
    Register {
        process: usize,
        resource: usize,
        permits: u32,
        groups: usize,
    },
    Unregister {
        process: usize,
        resource: usize,
        force: bool,
    },
    Acquire {
        process: usize,
    },
    Release {
        process: usize,
    },
    SetGroup {
        process: usize,
        group: usize,
        rpm: Option<u32>,
    },
    Report {
        process: usize,
        resource: usize,
    },
    /// An entry another writer logged between a check and its append:
    /// appended as it is, without a check.
    Raced {
        resource: usize,
        permits: u32,
        groups: usize,
    },
    Advance {
        ms: u64,
    },
}

const PROCESSES: usize = 3;
const GROUPS: [&[&str]; 4] = [&[], &["g1"], &["g2"], &["g1", "g2"]];

fn step() -> impl Strategy<Value = Step> {
    let process = 0..PROCESSES;
    prop_oneof![
        3 => (process.clone(), 0..4usize, 1..4u32, 0..4usize)
            .prop_map(|(process, resource, permits, groups)| Step::Register { process, resource, permits, groups }),
        1 => (process.clone(), 0..4usize, any::<bool>())
            .prop_map(|(process, resource, force)| Step::Unregister { process, resource, force }),
        4 => process.clone().prop_map(|process| Step::Acquire { process }),
        3 => process.clone().prop_map(|process| Step::Release { process }),
        1 => (process.clone(), 0..2usize, prop::option::of(1..5u32))
            .prop_map(|(process, group, rpm)| Step::SetGroup { process, group, rpm }),
        2 => (process, 0..4usize).prop_map(|(process, resource)| Step::Report { process, resource }),
        1 => (0..4usize, 1..4u32, 0..4usize).prop_map(|(resource, permits, groups)| Step::Raced { resource, permits, groups }),
        2 => (1..5_000u64).prop_map(|ms| Step::Advance { ms }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// However the processes' changes, grants and releases interleave, and
    /// whatever each holds when it folds, every process reaches the
    /// registrations a process opening the log from its start reaches, and
    /// counts the same refused entries; no permit is granted twice.
    #[test]
    fn every_process_folds_the_log_to_the_same_registrations(steps in prop::collection::vec(step(), 1..80)) {
        let tenant = Tenant::new();
        let mut processes: Vec<Journal<Log>> = (0..PROCESSES).map(|_| tenant.open()).collect();
        let mut held: Vec<Vec<(u64, u64)>> = vec![Vec::new(); PROCESSES];
        let resource = |i: usize| rid(&format!("k{i}"));
        for step in steps {
            match step {
                Step::Register { process, resource: r, permits, groups } => {
                    let _ = change(&mut processes[process], register(&resource(r), permits, GROUPS[groups]));
                }
                Step::Unregister { process, resource: r, force } => {
                    let _ = change(&mut processes[process], Command::Unregister { resource: resource(r), force });
                }
                Step::Acquire { process } => {
                    if let Ok(l) = processes[process].run(|p, now| p.acquire(&ctx("c"), now)) {
                        held[process].push((l.id, l.token));
                    }
                }
                Step::Release { process } => {
                    if let Some((id, token)) = held[process].pop() {
                        let _ = processes[process].run(|p, now| p.release(id, token, now));
                    }
                }
                Step::SetGroup { process, group, rpm } => {
                    let name = GroupName::new(["g1", "g2"][group]).unwrap();
                    let limits = GroupLimits { rpm, ..GroupLimits::default() };
                    let _ = change(&mut processes[process], Command::SetGroup { name, limits });
                }
                Step::Report { process, resource: r } => {
                    let report = Command::Report { resource: resource(r), context: ctx("c"), outcome: ok() };
                    let _ = change(&mut processes[process], report);
                }
                Step::Raced { resource: r, permits, groups } => {
                    tenant.log.push(register(&resource(r), permits, GROUPS[groups]));
                }
                Step::Advance { ms } => tenant.log.clock.advance(ms * 1_000_000),
            }
        }
        for process in &mut processes {
            process.fold(None).unwrap();
        }
        let fresh = tenant.open();
        let expected = registrations(fresh.pool());
        for process in &processes {
            prop_assert_eq!(registrations(process.pool()), expected.clone());
            prop_assert_eq!(process.pool().refused_entries(), fresh.pool().refused_entries());
            let views = process.pool().resources();
            for v in &views {
                prop_assert!(v.leased <= v.permits);
            }
        }
    }
}

#[test]
fn a_pool_that_has_not_folded_a_groups_limits_is_refused_as_stale_and_grants_within_them() {
    let tenant = Tenant::new();
    let (mut s1, mut s2) = (tenant.open(), tenant.open());
    for key in ["k1", "k2", "k3"] {
        change(&mut s1, register(&rid(key), 1, &["g"])).unwrap();
    }
    s2.fold(None).unwrap();
    let limits = GroupLimits { rpm: Some(2), ..GroupLimits::default() };
    change(&mut s2, Command::SetGroup { name: GroupName::new("g").unwrap(), limits }).unwrap();
    // S1 has not folded the limits: its first grant is refused as stale,
    // and granted once it has folded them, counted in the group.
    let mut granted = 0;
    for _ in 0..3 {
        let lease = s1.granting(|p, now| p.acquire(&ctx("c"), now));
        if let Ok(l) = lease {
            granted += 1;
            s1.run(|p, now| p.release(l.id, l.token, now)).unwrap();
        }
    }
    assert_eq!(granted, 2, "the group's rpm of 2, though S1 had not synced");
    assert_eq!(s1.pool().groups(0)[0].limits, limits);
    assert!(!s1.pool_mut().take_stale());
    // Without the fold a stale pool refuses rather than grant outside them.
    let mut stale = tenant.open();
    change(&mut s2, Command::SetGroup { name: GroupName::new("g").unwrap(), limits: GroupLimits::default() }).unwrap();
    assert!(stale.run(|p, now| p.acquire(&ctx("c"), now)).is_err());
    assert!(stale.pool_mut().take_stale());
}
