//! The binary form: a fixed header, then the postcard body it checksums.

use alloc::vec::Vec;

use super::data::SnapshotData;
use super::{invalid, SnapshotError, MAGIC, VERSION};

const HEADER: usize = 8 + 2 + 2 + 4 + 4;
const FLAG_LEASES: u16 = 1;
/// Every flag this build knows; a snapshot with any other bit set was
/// written by something this build does not understand, so it is refused.
const KNOWN_FLAGS: u16 = FLAG_LEASES;

pub(super) fn encode(data: &SnapshotData) -> Vec<u8> {
    let body = postcard::to_allocvec(data).expect("snapshot data serializes");
    let mut out = Vec::with_capacity(HEADER + body.len());
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    let flags = if data.has_leases() { FLAG_LEASES } else { 0 };
    out.extend_from_slice(&flags.to_le_bytes());
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
    out.extend_from_slice(&body);
    out
}

pub(super) fn decode(bytes: &[u8]) -> Result<SnapshotData, SnapshotError> {
    if bytes.len() < 8 {
        return Err(if MAGIC.starts_with(bytes) { SnapshotError::Truncated } else { SnapshotError::Foreign });
    }
    if bytes[..8] != MAGIC {
        return Err(SnapshotError::Foreign);
    }
    if bytes.len() < HEADER {
        return Err(SnapshotError::Truncated);
    }
    let u16_at = |i: usize| u16::from_le_bytes([bytes[i], bytes[i + 1]]);
    let u32_at = |i: usize| u32::from_le_bytes([bytes[i], bytes[i + 1], bytes[i + 2], bytes[i + 3]]);
    let version = u16_at(8);
    // Format 1 lacked pauses and the recovery rules: it is refused, not guessed at.
    if version != VERSION {
        return Err(SnapshotError::UnsupportedVersion { found: version, supported: VERSION });
    }
    let len = u32_at(12) as usize;
    let body = &bytes[HEADER..];
    if body.len() < len {
        return Err(SnapshotError::Truncated);
    }
    if body.len() > len {
        return Err(SnapshotError::Malformed);
    }
    if crc32fast::hash(body) != u32_at(16) {
        return Err(SnapshotError::Checksum);
    }
    let flags = u16_at(10);
    if flags & !KNOWN_FLAGS != 0 {
        return Err(invalid("flags", "unknown flag bits are set"));
    }
    let (data, rest): (SnapshotData, _) = postcard::take_from_bytes(body).map_err(|_| SnapshotError::Malformed)?;
    if !rest.is_empty() {
        return Err(invalid("body", "must end where its data ends (trailing bytes)"));
    }
    if data.has_leases() != (flags & FLAG_LEASES != 0) {
        return Err(SnapshotError::Malformed);
    }
    Ok(data)
}
