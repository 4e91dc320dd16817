//! The binary snapshot decoder. The first input byte picks how the rest is
//! read: as a whole snapshot, or (odd bytes) as a body that gets a valid
//! header with the right length and checksum, so the fuzzer reaches the
//! postcard decoder and the pool's rules instead of stopping at the CRC.
//! Oracle: no panic; a snapshot that decodes satisfies every property of
//! `repute_fuzz::accepted`; one that does not is refused by every reader
//! (restore, JSON view) and a refused restore changes nothing.

#![no_main]

use libfuzzer_sys::fuzz_target;
use repute_core::snapshot::{binary_to_json, capped, CappedInput, Caps, MAGIC, VERSION};
use repute_core::Pool;
use repute_fuzz::{accepted, held_to_caps, refused, NOW};

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    let bytes = if mode & 1 == 1 { framed(rest, mode) } else { rest.to_vec() };
    match Pool::from_snapshot(&bytes, NOW) {
        Ok(pool) => accepted(&bytes, pool),
        Err(_) => {
            refused(|p| p.restore(&bytes, NOW));
            // The JSON view only decodes, so it may accept what the pool's
            // rules refuse; what it accepts must still hold to the caps.
            if let Ok(json) = binary_to_json(&bytes) {
                held_to_caps(CappedInput::Json(&json));
            }
            let _ = capped(CappedInput::Binary(&bytes), &Caps::default());
        }
    }
});

/// `body` behind a header of this format: bit 1 of `mode` sets the leases
/// flag; bits 2 and 3 together, a flag no build knows.
fn framed(body: &[u8], mode: u8) -> Vec<u8> {
    let flags = u16::from(mode >> 1 & 1) | if mode & 0x0c == 0x0c { 0x80 } else { 0 };
    let mut out = Vec::with_capacity(20 + body.len());
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&flags.to_le_bytes());
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(body).to_le_bytes());
    out.extend_from_slice(body);
    out
}
