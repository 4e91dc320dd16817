//! Durable state behind the `storage` import: conditional checkpoints and
//! the command log.

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
}
