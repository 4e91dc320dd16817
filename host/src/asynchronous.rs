//! Async faces for pools whose providers do IO (SQLite now; networked stores
//! later): each call runs on tokio's blocking pool, so a slow disk never
//! stalls an async executor thread. Pools whose providers are all in memory
//! gain nothing from this; call them directly.

use std::sync::{Arc, Mutex};

use crate::error::{Error, Result};
use crate::pool::{Pool, PoolSet, TenantPool};
use crate::providers::Providers;
use crate::TenantConfig;

fn joined<R>(r: std::result::Result<R, tokio::task::JoinError>) -> Result<R> {
    // The closures run host code only (a trap is already an `Error`), so a
    // failed join means the caller's own closure panicked or the runtime is
    // shutting down.
    r.map_err(|e| Error::Runtime { message: format!("blocking task failed: {e}") })
}

/// A [`Pool`] shared by async tasks.
#[derive(Debug, Clone)]
pub struct AsyncPool {
    pool: Arc<Mutex<Pool>>,
}

impl AsyncPool {
    /// Opens a tenant (which may read storage) off the executor.
    pub async fn open(config: TenantConfig, providers: Providers) -> Result<AsyncPool> {
        let pool = joined(tokio::task::spawn_blocking(move || Pool::open(config, providers)).await)??;
        Ok(AsyncPool { pool: Arc::new(Mutex::new(pool)) })
    }

    /// Runs `f` on the pool on the blocking pool; calls are serialized.
    pub async fn call<R: Send + 'static>(&self, f: impl FnOnce(&mut Pool) -> R + Send + 'static) -> Result<R> {
        let pool = self.pool.clone();
        joined(tokio::task::spawn_blocking(move || f(&mut pool.lock().unwrap_or_else(|p| p.into_inner()))).await)
    }
}

/// A [`PoolSet`] shared by async tasks.
#[derive(Debug, Clone)]
pub struct AsyncPoolSet {
    set: Arc<PoolSet>,
}

impl AsyncPoolSet {
    pub fn new(set: PoolSet) -> AsyncPoolSet {
        AsyncPoolSet { set: Arc::new(set) }
    }

    /// `PoolSet::open_tenant` off the executor.
    pub async fn open_tenant(&self, tenant: &str, config: TenantConfig, providers: Providers) -> Result<()> {
        let (set, tenant) = (self.set.clone(), tenant.to_owned());
        joined(tokio::task::spawn_blocking(move || set.open_tenant(&tenant, config, providers)).await)?
    }

    /// `PoolSet::with` off the executor.
    pub async fn with<R: Send + 'static>(
        &self,
        tenant: &str,
        f: impl FnOnce(&mut TenantPool<'_>) -> R + Send + 'static,
    ) -> Result<R> {
        let (set, tenant) = (self.set.clone(), tenant.to_owned());
        joined(tokio::task::spawn_blocking(move || set.with(&tenant, f)).await)?
    }
}
