//! The blocklist: blocks of a resource everywhere or in one context.

use alloc::string::String;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::event::EventKind;
use crate::id::{Context, ResourceId};

use super::{Pool, Timer, MAX_REASON_BYTES};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Block {
    pub until: Option<u64>,
    pub reason: Option<String>,
}

/// Heap bytes of a block's reason (see `Pool::footprint`).
pub(super) fn reason_bytes(block: &Option<Block>) -> usize {
    block.as_ref().and_then(|b| b.reason.as_ref()).map_or(0, String::capacity)
}

impl Pool {
    pub(super) fn blocked(&self, slot: u32, ctx: Option<u32>) -> bool {
        self.registry.res(slot).block.is_some()
            || ctx.and_then(|c| self.cells.get(&(slot, c))).is_some_and(|cc| cc.block.is_some())
    }

    /// Blocks a resource everywhere (`context: None`) or in one context, for
    /// `duration` nanoseconds or until unblocked. Live leases run on but are not renewed.
    pub fn block(
        &mut self,
        id: &ResourceId,
        context: Option<&Context>,
        duration: Option<u64>,
        reason: Option<String>,
        now: u64,
    ) -> Result<()> {
        check_block(duration, reason.as_deref())?;
        self.advance(now);
        let slot = self.registry.slot_of(id)?;
        let until = duration.map(|d| self.now.saturating_add(d));
        let block = Some(Block { until, reason: reason.clone() });
        let ctx = match context {
            None => {
                self.registry.res_mut(slot).block = block;
                None
            }
            Some(context) => {
                let c = self.cell_for(slot, context)?;
                self.cells.get_mut(&(slot, c)).expect("cell exists").block = block;
                Some(c)
            }
        };
        if let Some(until) = until {
            self.timers.arm(until, Timer::Block(slot, ctx));
        }
        self.reindex(slot);
        let context = context.cloned();
        self.emit(self.now, EventKind::Blocklisted { resource: id.clone(), context, until, reason });
        Ok(())
    }

    /// Lifts a block; returns whether one was in place.
    pub fn unblock(&mut self, id: &ResourceId, context: Option<&Context>, now: u64) -> Result<bool> {
        self.advance(now);
        let slot = self.registry.slot_of(id)?;
        let lifted = match context {
            None => self.registry.res_mut(slot).block.take().is_some(),
            Some(context) => match self.contexts.id(context) {
                Some(c) => self.cells.get_mut(&(slot, c)).is_some_and(|cc| cc.block.take().is_some()),
                None => false,
            },
        };
        if lifted {
            self.reindex(slot);
            let context = context.cloned();
            self.emit(self.now, EventKind::Unblocked { resource: id.clone(), context });
        }
        Ok(lifted)
    }
}

/// The rules a block's duration and reason keep.
pub(crate) fn check_block(duration: Option<u64>, reason: Option<&str>) -> Result<()> {
    if duration == Some(0) {
        return Err(Error::invalid("duration", "must be > 0 (omit it for a permanent block)"));
    }
    if let Some(r) = reason {
        if r.len() > MAX_REASON_BYTES {
            return Err(Error::invalid("reason", "must be at most 1024 bytes"));
        }
        if r.chars().any(char::is_control) {
            return Err(Error::invalid("reason", "must not contain control characters"));
        }
    }
    Ok(())
}
