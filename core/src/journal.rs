//! The journal: a pool kept durable as a checkpoint plus the log of changes
//! since, the one replication protocol both hosts of the core run (the
//! component over its storage import, the native double over the host's
//! providers). Opening loads the newest checkpoint and folds the log after
//! it; a logged change is decided before it is appended (`Pool::check`:
//! what it reads is log-derived, or the authority's count of live leases,
//! which knows every process's), then appended, then applied after what
//! other writers appended first exactly as every process folds it
//! (`Pool::apply`), so an acknowledged change is durable and every copy of
//! the pool reaches the same state (I8).

use alloc::vec::Vec;

use crate::command::Command;
use crate::error::Error;
use crate::policy::Policy;
use crate::pool::Pool;

/// Entries read from the log per call.
const PAGE: u32 = 1024;

/// A checkpoint as storage holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    /// A binary snapshot.
    pub bytes: Vec<u8>,
    /// Storage's version of it; the next save expects this one.
    pub version: u64,
    /// The last log entry folded into it.
    pub log_seq: u64,
}

/// Durable storage as a journal uses it, with the clock of the process it
/// serves: a command folded from the log runs at that clock's now.
pub trait Storage {
    /// A log entry as this storage appends it.
    type Entry;
    /// Why storage refused or failed an operation.
    type Error;

    /// The caller's monotonic now, in nanoseconds.
    fn now(&mut self) -> u64;
    /// The newest checkpoint, if any.
    fn load(&mut self) -> core::result::Result<Option<Checkpoint>, Self::Error>;
    /// Saves a checkpoint if storage still holds `expected_version`; the new version.
    fn save(&mut self, bytes: &[u8], expected_version: u64, log_seq: u64) -> core::result::Result<u64, Self::Error>;
    /// Appends an entry; its sequence number.
    fn append(&mut self, entry: Self::Entry) -> core::result::Result<u64, Self::Error>;
    /// Up to `limit` entries after sequence `after`, oldest first, each with
    /// its command; `None` for one that does not read as a command, which is
    /// skipped as a refused command is.
    fn read_log(&mut self, after: u64, limit: u32) -> core::result::Result<Vec<(u64, Option<Command>)>, Self::Error>;
}

/// What a journal operation failed on.
#[derive(Debug, Clone, PartialEq)]
pub enum JournalError<E> {
    /// Storage refused or failed; nothing was applied.
    Storage(E),
    /// The pool refused the operation.
    Pool(Error),
}

/// A pool and the journal that keeps it durable.
#[derive(Debug)]
pub struct Journal<S> {
    pool: Pool,
    storage: S,
    /// Checkpoint version last loaded or saved; the next save expects it.
    version: u64,
    /// Highest log entry folded into the pool.
    log_seq: u64,
    /// Changes are appended to the log before they run.
    log: bool,
}

impl<S: Storage> Journal<S> {
    /// A pool that neither loads a checkpoint nor logs its changes.
    pub fn unlogged(pool: Pool, storage: S) -> Self {
        Journal { pool, storage, version: 0, log_seq: 0, log: false }
    }

    /// The pool as storage left it: the newest checkpoint restored (a new
    /// pool of `policy` and `seed` without one), made ready by `prepare`,
    /// then the log after it folded. With `log`, changes from here on are
    /// appended before they run.
    pub fn open(
        policy: Policy,
        seed: u64,
        log: bool,
        mut storage: S,
        prepare: impl FnOnce(&mut Pool, &mut S),
    ) -> core::result::Result<Self, JournalError<S::Error>> {
        policy.validate().map_err(JournalError::Pool)?;
        let checkpoint = storage.load().map_err(JournalError::Storage)?;
        let pool = match &checkpoint {
            Some(c) => Pool::from_snapshot(&c.bytes, storage.now()),
            None => Pool::new(policy, seed),
        };
        let mut journal = Journal { pool: pool.map_err(JournalError::Pool)?, storage, version: 0, log_seq: 0, log };
        prepare(&mut journal.pool, &mut journal.storage);
        if let Some(c) = checkpoint {
            journal.version = c.version;
            journal.log_seq = c.log_seq;
            journal.pool.set_view(c.log_seq);
        }
        journal.fold(None).map_err(JournalError::Storage)?;
        Ok(journal)
    }

    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    pub fn pool_mut(&mut self) -> &mut Pool {
        &mut self.pool
    }

    /// Runs one operation at storage's now.
    pub fn run<T>(&mut self, f: impl FnOnce(&mut Pool, u64) -> T) -> T {
        let now = self.storage.now();
        f(&mut self.pool, now)
    }

    /// Runs an operation that may grant: when the authority found it judged
    /// on a view of the log older than the last change of registrations or
    /// groups, the log is folded and the operation runs once more, on the
    /// new view (an unreadable log leaves the first answer, a refusal).
    pub fn granting<T>(&mut self, mut f: impl FnMut(&mut Pool, u64) -> T) -> T {
        let out = self.run(&mut f);
        if !self.pool.take_stale() || self.fold(None).is_err() {
            return out;
        }
        self.run(f)
    }

    /// Catches up with what other processes did: folds the whole log, and
    /// asks the authority again about each group this pool holds out at
    /// its concurrency (a release elsewhere, which no log entry records,
    /// may have freed a slot). Returns how many entries were folded.
    pub fn sync(&mut self) -> core::result::Result<u32, S::Error> {
        let folded = self.fold(None)?;
        let now = self.storage.now();
        self.pool.reopen_concurrency_gates(now);
        Ok(folded)
    }

    /// Folds the log entries after the last one folded and before `until`
    /// (all of them when `None`) into the pool; returns how many.
    pub fn fold(&mut self, until: Option<u64>) -> core::result::Result<u32, S::Error> {
        let mut folded = 0;
        loop {
            if until.is_some_and(|u| self.log_seq + 1 >= u) {
                return Ok(folded);
            }
            let page = self.storage.read_log(self.log_seq, PAGE)?;
            let full = page.len() >= PAGE as usize;
            for (seq, command) in page {
                if until.is_some_and(|u| seq >= u) {
                    return Ok(folded);
                }
                // A refusal here is the refusal the writer saw when it
                // applied the entry (see `logged`) and every process sees:
                // applied nowhere, counted everywhere alike.
                match command {
                    Some(command) => {
                        if self.run(|p, now| p.apply(&command, now)).is_err() {
                            self.pool.count_refused_entry();
                        }
                    }
                    None => self.pool.count_refused_entry(),
                }
                self.log_seq = seq;
                self.pool.set_view(seq);
                folded += 1;
            }
            if !full {
                return Ok(folded);
            }
        }
    }

    /// Runs a change. When logging, it is decided first (`Pool::check`,
    /// after folding what others logged when the decision reads a
    /// registration), then `entry` is appended and the change applied after
    /// what other writers appended before it, as every process applies it
    /// (`Pool::apply`), so an acknowledged change is durable and a refused
    /// one is refused alike everywhere. A change `check` finds changes
    /// nothing is not logged. `Ok(true)` as `Pool::apply` answers.
    pub fn logged(
        &mut self,
        entry: impl FnOnce() -> S::Entry,
        command: &Command,
    ) -> core::result::Result<bool, JournalError<S::Error>> {
        if self.log && command.reads_registration() {
            self.fold(None).map_err(JournalError::Storage)?;
        }
        if !self.run(|p, now| p.check(command, now)).map_err(JournalError::Pool)? {
            return Ok(false);
        }
        if !self.log {
            return self.run(|p, now| p.apply(command, now)).map_err(JournalError::Pool);
        }
        let seq = self.storage.append(entry()).map_err(JournalError::Storage)?;
        self.fold(Some(seq)).map_err(JournalError::Storage)?;
        let out = self.run(|p, now| p.apply(command, now));
        self.log_seq = seq;
        self.pool.set_view(seq);
        if out.is_err() {
            self.pool.count_refused_entry();
        }
        out.map_err(JournalError::Pool)
    }

    /// Saves a binary snapshot as the checkpoint, conditional on the version
    /// last loaded or saved; the new version.
    pub fn checkpoint(&mut self, with_leases: bool) -> core::result::Result<u64, S::Error> {
        let bytes = self.run(|p, now| p.snapshot(now, with_leases));
        self.version = self.storage.save(&bytes, self.version, self.log_seq)?;
        Ok(self.version)
    }
}
