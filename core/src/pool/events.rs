//! The events waiting for the host: bounded, oldest dropped first, so a
//! host that never drains them holds at most `limit` of them.

use alloc::collections::VecDeque;
use alloc::vec::Vec;

use crate::event::Event;

#[derive(Debug)]
pub(crate) struct Events {
    pub pending: VecDeque<Event>,
    limit: usize,
    pub dropped: u64,
}

impl Default for Events {
    fn default() -> Self {
        Events { pending: VecDeque::new(), limit: usize::MAX, dropped: 0 }
    }
}

impl Events {
    pub fn push(&mut self, event: Event) {
        if self.limit == 0 {
            return;
        }
        if self.pending.len() == self.limit {
            self.pending.pop_front();
            self.dropped += 1;
        }
        self.pending.push_back(event);
    }

    pub fn drain(&mut self) -> Vec<Event> {
        core::mem::take(&mut self.pending).into()
    }

    /// A lower limit drops the oldest of what waits now beyond it.
    pub fn set_limit(&mut self, limit: usize) {
        self.limit = limit;
        let excess = self.pending.len().saturating_sub(limit);
        self.pending.drain(..excess);
        self.dropped += excess as u64;
    }
}
