//! Durable state behind the `storage` import: conditional checkpoints and
//! the report log.

use repute_core::Outcome;

use crate::error::StoreError;

/// A saved checkpoint.
#[derive(Debug, Clone, PartialEq)]
pub struct Checkpoint {
    /// Owner epoch of the writer that saved it.
    pub epoch: u64,
    /// Incremented by every successful save; the compare-and-set key.
    pub version: u64,
    /// Report log position folded into it; replay starts after it.
    pub report_seq: u64,
    /// A binary snapshot of the pool.
    pub bytes: Vec<u8>,
}

/// One acknowledged report in the log.
#[derive(Debug, Clone, PartialEq)]
pub struct ReportEntry {
    pub seq: u64,
    pub kind: String,
    pub value: String,
    pub context: String,
    pub outcome: Outcome,
}

/// Checkpoints and report log of one tenant. Every write is conditional:
/// a save names the version it expects, and a store that knows owner epochs
/// refuses a writer whose epoch is lower than the stored one.
pub trait Storage: Send {
    fn load(&mut self) -> Result<Option<Checkpoint>, StoreError>;

    /// Saves the next checkpoint if the stored version is `expected_version`
    /// (0 when none exists); returns the new version.
    fn save(&mut self, bytes: &[u8], expected_version: u64, report_seq: u64) -> Result<u64, StoreError>;

    /// Appends a report; returns its sequence number (strictly increasing).
    fn append_report(&mut self, kind: &str, value: &str, context: &str, outcome: &Outcome) -> Result<u64, StoreError>;

    /// Up to `limit` entries after `after`, in order.
    fn read_reports(&mut self, after: u64, limit: u32) -> Result<Vec<ReportEntry>, StoreError>;
}

/// Storage that lives as long as the process: for tests, simulations and
/// pools that need no durability.
#[derive(Debug, Default)]
pub struct MemoryStorage {
    checkpoint: Option<Checkpoint>,
    reports: Vec<ReportEntry>,
}

impl Storage for MemoryStorage {
    fn load(&mut self) -> Result<Option<Checkpoint>, StoreError> {
        Ok(self.checkpoint.clone())
    }

    fn save(&mut self, bytes: &[u8], expected_version: u64, report_seq: u64) -> Result<u64, StoreError> {
        let found = self.checkpoint.as_ref().map_or(0, |c| c.version);
        if found != expected_version {
            return Err(StoreError::Conflict { expected: expected_version, found });
        }
        let version = found + 1;
        self.checkpoint = Some(Checkpoint { epoch: 1, version, report_seq, bytes: bytes.to_vec() });
        // Reports folded into the checkpoint are no longer needed for replay.
        self.reports.retain(|r| r.seq > report_seq);
        Ok(version)
    }

    fn append_report(&mut self, kind: &str, value: &str, context: &str, outcome: &Outcome) -> Result<u64, StoreError> {
        let last = self.reports.last().map(|r| r.seq);
        let seq = last.or(self.checkpoint.as_ref().map(|c| c.report_seq)).unwrap_or(0) + 1;
        self.reports.push(ReportEntry {
            seq,
            kind: kind.to_owned(),
            value: value.to_owned(),
            context: context.to_owned(),
            outcome: *outcome,
        });
        Ok(seq)
    }

    fn read_reports(&mut self, after: u64, limit: u32) -> Result<Vec<ReportEntry>, StoreError> {
        let start = self.reports.partition_point(|r| r.seq <= after);
        Ok(self.reports[start..].iter().take(limit as usize).cloned().collect())
    }
}
