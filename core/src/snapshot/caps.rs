//! Operator caps over an imported snapshot's own policy.

use alloc::vec::Vec;

use crate::policy::RateLimit;

use super::binary::{decode, encode};
use super::data::SnapshotData;
use super::json::from_json;
use super::SnapshotError;

/// Limits an operator sets over whatever a snapshot's own policy says.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Caps {
    pub max_resources: Option<u32>,
    pub max_cells: Option<u32>,
    pub rate_limit: Option<RateLimit>,
}

fn tighter(snapshot: Option<u32>, cap: Option<u32>) -> Option<u32> {
    match (snapshot, cap) {
        (Some(s), Some(c)) => Some(s.min(c)),
        (s, c) => s.or(c),
    }
}

impl Caps {
    /// Each budget becomes the tighter of the snapshot's and the cap, so a
    /// tenant cannot lift an operator's limit by importing a policy without it.
    fn apply(&self, data: &mut SnapshotData) {
        let p = &mut data.policy;
        p.max_resources = tighter(p.max_resources, self.max_resources);
        p.max_cells = tighter(p.max_cells, self.max_cells);
        p.rate_limit = match (p.rate_limit, self.rate_limit) {
            (Some(s), Some(c)) => Some(RateLimit { rate: s.rate.min(c.rate), burst: s.burst.min(c.burst) }),
            (s, c) => s.or(c),
        };
        if let (Some(limit), Some(tokens)) = (p.rate_limit, data.rate_tokens.as_mut()) {
            *tokens = tokens.min(limit.burst as f64);
        }
    }
}

/// A binary snapshot (`bytes`) or its JSON view (`json`) as a binary
/// snapshot whose policy is held to `caps`; validated by building it, so a
/// snapshot holding more than the caps allow is refused.
pub fn capped(input: CappedInput<'_>, caps: &Caps) -> Result<Vec<u8>, SnapshotError> {
    let mut data = match input {
        CappedInput::Binary(bytes) => decode(bytes)?,
        CappedInput::Json(json) => from_json(json)?,
    };
    caps.apply(&mut data);
    data.clone().build(0, 0)?;
    Ok(encode(&data))
}

/// The two forms `capped` reads.
#[derive(Debug, Clone, Copy)]
pub enum CappedInput<'a> {
    Binary(&'a [u8]),
    Json(&'a str),
}
