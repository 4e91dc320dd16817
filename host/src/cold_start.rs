//! What a cold start costs, for the benchmark: a new process's first lease.

use std::time::{Duration, Instant};

use repute_core::{Registration, Selector};

use crate::config::{ShardLimits, TenantConfig};
use crate::error::Error;
use crate::providers::Providers;
use crate::runtime;
use crate::shard::Shard;

/// Measures a cold start as a new process would pay it, minus exec: a new
/// engine, the precompiled component deserialized and linked, a shard
/// instantiated, a tenant opened, one resource registered, the first lease
/// acquired. For the benchmark: the time, and whether the precompiled form
/// was used (false means the component had to be compiled at start).
#[doc(hidden)]
pub fn measure_cold_start() -> Result<(Duration, bool), Error> {
    let started = Instant::now();
    let runtime = runtime::cold()?;
    let precompiled = runtime.precompiled;
    let mut shard = Shard::with_runtime(runtime, ShardLimits::default())?;
    let tenant = shard.add(TenantConfig::default(), Providers::memory())?;
    shard.register_with(tenant, "proxy", "a", &Registration::new(1))?;
    shard.acquire_with(tenant, "example.com", &Selector::default())?;
    Ok((started.elapsed(), precompiled))
}
