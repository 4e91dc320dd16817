//! The JSON view: the same data with its format number, and bounds on its size.

use alloc::string::String;

use serde::{Deserialize, Serialize};

use super::data::SnapshotData;
use super::{SnapshotError, VERSION};

/// The JSON form of `data`, without secrets (see `Secret`).
pub(super) fn to_json(data: &SnapshotData) -> String {
    #[derive(Serialize)]
    struct Versioned<'a> {
        format: u16,
        #[serde(flatten)]
        data: &'a SnapshotData,
    }
    let mut data = data.clone();
    data.forget_secrets();
    serde_json::to_string_pretty(&Versioned { format: VERSION, data: &data }).expect("snapshot data serializes")
}

pub(super) fn from_json(json: &str) -> Result<SnapshotData, SnapshotError> {
    #[derive(Deserialize)]
    struct Format {
        format: u16,
    }
    let f: Format = serde_json::from_str(json).map_err(|_| SnapshotError::Malformed)?;
    if f.format != VERSION {
        return Err(SnapshotError::UnsupportedVersion { found: f.format, supported: VERSION });
    }
    #[derive(Deserialize)]
    struct Versioned {
        #[allow(dead_code)]
        format: u16,
        #[serde(flatten)]
        data: SnapshotData,
    }
    let v: Versioned = serde_json::from_str(json).map_err(|_| SnapshotError::Malformed)?;
    Ok(v.data)
}

/// Most bytes the JSON view of a snapshot (the larger of the two forms)
/// takes per byte of the pool's footprint: at most 2.6 measured, on pools
/// of the longest names made of characters JSON escapes, full outcome
/// windows, long block reasons and leases in long contexts (the footprint
/// test keeps it so).
pub const JSON_PER_FOOTPRINT_BYTE: u64 = 3;

/// Bounds on the JSON view's size, measured the same way: a pool's fixed
/// part, one resource with one permit (longest names, the most labels with
/// the longest names and values, a block with the longest reason, a pause,
/// an empty outcome window, a learned pace), one cell (longest
/// context, a block with the longest reason, an empty window, an empty
/// usage window), and each outcome a window holds.
pub const JSON_BASE_BYTES: u64 = 1024;
pub const JSON_RESOURCE_BYTES: u64 = 14_400;
pub const JSON_CELL_BYTES: u64 = 4900;
pub const JSON_OUTCOME_BYTES: u64 = 100;

/// Largest JSON snapshot of a pool of at most `resources` one-permit
/// resources and `cells` cells whose windows hold `window` outcomes: what
/// a server's body limit must take for a tenant to re-import its export.
pub fn json_bound(resources: u32, cells: u32, window: u32) -> u64 {
    let window = u64::from(window) * JSON_OUTCOME_BYTES;
    JSON_BASE_BYTES
        + u64::from(resources) * (JSON_RESOURCE_BYTES + window)
        + u64::from(cells) * (JSON_CELL_BYTES + window)
}
