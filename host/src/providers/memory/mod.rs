//! The store that keeps nothing beyond the process: in-memory fencing and
//! storage for every tenant.

use std::sync::Arc;

use super::{Backend, Clock, Providers};
use crate::error::Result;

/// Nothing durable: state lives as long as the process.
#[derive(Debug, Clone, Copy, Default)]
pub struct Memory;

impl Backend for Memory {
    fn open(_: &str) -> Result<Memory> {
        Ok(Memory)
    }

    fn durable(&self) -> bool {
        false
    }

    fn tenant_providers(&self, _: &str, _: u64, clock: Arc<dyn Clock>) -> Result<Providers> {
        Ok(Providers::memory_with_clock(clock))
    }
}
