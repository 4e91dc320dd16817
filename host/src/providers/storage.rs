//! Durable state behind the `storage` import: conditional checkpoints and
//! the command log.

use std::collections::BTreeSet;

use repute_core::Command;

use crate::error::StoreError;

/// A saved checkpoint.
#[derive(Debug, Clone, PartialEq)]
pub struct Checkpoint {
    /// Owner epoch of the writer that saved it.
    pub epoch: u64,
    /// Incremented by every successful save; the compare-and-set key.
    pub version: u64,
    /// Log position folded into it; replay starts after it.
    pub log_seq: u64,
    /// A binary snapshot of the pool.
    pub bytes: Vec<u8>,
}

/// One acknowledged change in the log.
#[derive(Debug, Clone, PartialEq)]
pub struct LogEntry {
    pub seq: u64,
    pub command: Command,
}

/// A log entry as durable stores keep it: JSON, readable with the store's own tools.
pub(crate) fn encode_command(command: &Command) -> Result<String, StoreError> {
    serde_json::to_string(command).map_err(|e| StoreError::Unavailable(format!("log entry: {e}")))
}

/// A stored entry back as a command. A refusal names the entry by its
/// position and size and says where decoding stopped, never what it read:
/// an entry may hold a resource's secret, and serde's own message quotes
/// the value it did not expect.
pub(crate) fn decode_command(seq: u64, entry: &str) -> Result<Command, StoreError> {
    serde_json::from_str(entry).map_err(|e| {
        let category = format!("{:?}", e.classify()).to_lowercase();
        StoreError::Unavailable(format!(
            "log entry {seq} ({} bytes) does not decode: {category} error at line {} column {}",
            entry.len(),
            e.line(),
            e.column()
        ))
    })
}

/// Checkpoints and command log of one tenant. Every write is conditional:
/// a save names the version it expects, and a store that knows owner epochs
/// refuses a writer whose epoch is lower than the stored one.
pub trait Storage: Send {
    fn load(&mut self) -> Result<Option<Checkpoint>, StoreError>;

    /// Saves the next checkpoint if the stored version is `expected_version`
    /// (0 when none exists); returns the new version.
    fn save(&mut self, bytes: &[u8], expected_version: u64, log_seq: u64) -> Result<u64, StoreError>;

    /// Appends a change; returns its sequence number. Sequence numbers
    /// strictly increase in the order readers see them: an entry never
    /// becomes visible below a position a reader has already passed.
    fn append(&mut self, command: &Command) -> Result<u64, StoreError>;

    /// Up to `limit` entries after `after`, in order.
    fn read_log(&mut self, after: u64, limit: u32) -> Result<Vec<LogEntry>, StoreError>;

    /// The lowest lease id this owner may hand out: `epoch << 32` where the
    /// store raises an owner epoch on every open or takeover, so leases
    /// granted after a checkpoint by a crashed owner never share an id with
    /// the next owner's (4 billion leases per epoch). 0 where ids need no floor.
    fn lease_id_floor(&self) -> u64 {
        0
    }
}

/// Storage that lives as long as the process: for tests, simulations and
/// pools that need no durability.
#[derive(Debug, Default)]
pub struct MemoryStorage {
    checkpoint: Option<Checkpoint>,
    log: Vec<LogEntry>,
}

impl Storage for MemoryStorage {
    fn load(&mut self) -> Result<Option<Checkpoint>, StoreError> {
        Ok(self.checkpoint.clone())
    }

    fn save(&mut self, bytes: &[u8], expected_version: u64, log_seq: u64) -> Result<u64, StoreError> {
        let found = self.checkpoint.as_ref().map_or(0, |c| c.version);
        if found != expected_version {
            return Err(StoreError::Conflict { expected: expected_version, found });
        }
        let version = found + 1;
        self.checkpoint = Some(Checkpoint { epoch: 1, version, log_seq, bytes: bytes.to_vec() });
        // Entries folded into the checkpoint are no longer needed for replay.
        self.log.retain(|e| e.seq > log_seq);
        Ok(version)
    }

    fn append(&mut self, command: &Command) -> Result<u64, StoreError> {
        let last = self.log.last().map(|e| e.seq);
        let seq = last.or(self.checkpoint.as_ref().map(|c| c.log_seq)).unwrap_or(0) + 1;
        self.log.push(LogEntry { seq, command: command.clone() });
        Ok(seq)
    }

    fn read_log(&mut self, after: u64, limit: u32) -> Result<Vec<LogEntry>, StoreError> {
        let start = self.log.partition_point(|e| e.seq <= after);
        Ok(self.log[start..].iter().take(limit as usize).cloned().collect())
    }
}

/// Storage that counts, as its pool reads the log, the entries other
/// writers appended that the pool then folds: the work a process does for
/// the others' changes, which shared mode does for every entry and
/// partitioned mode only for its partitions' and the registrations. Each
/// entry is counted once, when first read, and the pool's own never.
pub struct FoldCount {
    inner: Box<dyn Storage>,
    /// Every position up to here has been read or is this pool's own.
    seen: u64,
    /// Positions this pool appended above `seen`, not yet read back.
    own: BTreeSet<u64>,
    count: Box<dyn Fn(u64) + Send>,
}

impl FoldCount {
    /// `inner`, telling `count` how many others' entries each read brought.
    pub fn new(inner: Box<dyn Storage>, count: Box<dyn Fn(u64) + Send>) -> FoldCount {
        FoldCount { inner, seen: 0, own: BTreeSet::new(), count }
    }
}

impl Storage for FoldCount {
    fn load(&mut self) -> Result<Option<Checkpoint>, StoreError> {
        let checkpoint = self.inner.load()?;
        if let Some(c) = &checkpoint {
            self.seen = self.seen.max(c.log_seq);
        }
        Ok(checkpoint)
    }

    fn save(&mut self, bytes: &[u8], expected_version: u64, log_seq: u64) -> Result<u64, StoreError> {
        self.inner.save(bytes, expected_version, log_seq)
    }

    fn append(&mut self, command: &Command) -> Result<u64, StoreError> {
        let seq = self.inner.append(command)?;
        if seq == self.seen + 1 {
            self.seen = seq;
        } else {
            // Others appended between: the pool reads up to here before it
            // applies its own, and this one must not count as theirs.
            self.own.insert(seq);
        }
        Ok(seq)
    }

    fn read_log(&mut self, after: u64, limit: u32) -> Result<Vec<LogEntry>, StoreError> {
        let entries = self.inner.read_log(after, limit)?;
        let mut theirs = 0;
        for e in entries.iter().filter(|e| e.seq > self.seen) {
            if !self.own.remove(&e.seq) {
                theirs += 1;
            }
        }
        if let Some(last) = entries.last() {
            self.seen = self.seen.max(last.seq);
            let seen = self.seen;
            self.own.retain(|&s| s > seen);
        }
        if theirs > 0 {
            (self.count)(theirs);
        }
        Ok(entries)
    }

    fn lease_id_floor(&self) -> u64 {
        self.inner.lease_id_floor()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_that_does_not_decode_is_named_by_position_never_by_its_text() {
        let entry = r#"{"Register":{"permits":"sk-live-123"}}"#;
        let StoreError::Unavailable(message) = decode_command(7, entry).unwrap_err() else { panic!("unavailable") };
        assert_eq!(message, "log entry 7 (38 bytes) does not decode: data error at line 1 column 36");
        let StoreError::Unavailable(message) = decode_command(8, "{\"Regi").unwrap_err() else { panic!() };
        assert_eq!(message, "log entry 8 (6 bytes) does not decode: eof error at line 1 column 6");
    }

    /// One log two writers share, each through its own handle.
    #[derive(Clone, Default)]
    struct Shared(std::sync::Arc<std::sync::Mutex<MemoryStorage>>);

    impl Storage for Shared {
        fn load(&mut self) -> Result<Option<Checkpoint>, StoreError> {
            self.0.lock().unwrap().load()
        }
        fn save(&mut self, bytes: &[u8], expected_version: u64, log_seq: u64) -> Result<u64, StoreError> {
            self.0.lock().unwrap().save(bytes, expected_version, log_seq)
        }
        fn append(&mut self, command: &Command) -> Result<u64, StoreError> {
            self.0.lock().unwrap().append(command)
        }
        fn read_log(&mut self, after: u64, limit: u32) -> Result<Vec<LogEntry>, StoreError> {
            self.0.lock().unwrap().read_log(after, limit)
        }
    }

    #[test]
    fn a_fold_count_counts_each_entry_of_the_others_once_and_its_own_never() {
        let log = Shared::default();
        let counted = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let tally = counted.clone();
        let count = Box::new(move |n| {
            tally.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
        });
        let (mut mine, mut theirs) = (FoldCount::new(Box::new(log.clone()), count), log);
        let entry = Command::Unblock { resource: repute_core::ResourceId::new("proxy", "p1").unwrap(), context: None };
        let counted = || counted.load(std::sync::atomic::Ordering::Relaxed);

        assert_eq!(mine.append(&entry).unwrap(), 1);
        assert_eq!(mine.read_log(0, 10).unwrap().len(), 1);
        assert_eq!(counted(), 0, "its own entry is not the others' work");
        theirs.append(&entry).unwrap();
        theirs.append(&entry).unwrap();
        assert_eq!(mine.append(&entry).unwrap(), 4);
        // A page that runs past an entry not applied yet, then the same again.
        assert_eq!(mine.read_log(1, 2).unwrap().len(), 2);
        assert_eq!(mine.read_log(1, 10).unwrap().len(), 3);
        assert_eq!(counted(), 2, "two of theirs, each once; its own at 4 not at all");
        theirs.append(&entry).unwrap();
        assert_eq!(mine.read_log(4, 10).unwrap().len(), 1);
        assert_eq!(counted(), 3);
    }
}
