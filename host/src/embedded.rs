//! A tenant's pool inside an application (the Python and Node bindings),
//! with the owner lease it needs in sharded mode. Unlike the server, an
//! embedded pool never takes a tenant back once its lease lapsed: it
//! answers `NotOwner` until the application opens the tenant again.

use std::sync::Arc;
use std::time::Duration;

use crate::config::TenantConfig;
use crate::error::Result;
use crate::ownership::{Keeper, Ownership, Standing};
use crate::pool::Pool;
#[cfg(feature = "redis")]
use crate::providers::RedisWire;
use crate::providers::{Backend, Clock, Providers, Releases};
use crate::store::{Mode, OwnersSpec};

/// How an embedded pool shares its tenant with other processes; only the
/// shared stores (PostgreSQL, Redis) look at it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sharing {
    pub mode: Mode,
    /// The owner lease of a sharded tenant.
    pub owner_ttl: Duration,
    /// Where sharded mode keeps owner leases.
    pub owners: OwnersSpec,
}

impl Default for Sharing {
    fn default() -> Self {
        Sharing { mode: Mode::Sharded, owner_ttl: Duration::from_secs(10), owners: OwnersSpec::Store }
    }
}

#[derive(Debug)]
struct Owner {
    ownership: Arc<Ownership>,
    tenant: String,
    keeper: Keeper,
}

/// An open pool and, in sharded mode, the owner lease it serves under.
#[derive(Debug)]
pub struct EmbeddedPool {
    pool: Pool,
    owner: Option<Owner>,
    #[cfg(feature = "redis")]
    wire: Option<RedisWire>,
    /// Releases other processes make, until a holder takes them.
    releases: Option<Box<dyn Releases>>,
}

impl EmbeddedPool {
    /// Opens `tenant`; in sharded mode it first claims the tenant (refused
    /// with `NotOwner` while another process holds it) and renews the lease
    /// on a thread of its own. Without an owner, writes carry epoch 0: the
    /// store alone arbitrates.
    pub fn open(
        store: &dyn Backend,
        sharing: &Sharing,
        tenant: &str,
        config: TenantConfig,
        clock: Arc<dyn Clock>,
    ) -> Result<EmbeddedPool> {
        let address = format!("embedded pid {}", std::process::id());
        let owned = match sharing.mode {
            Mode::Sharded => sharing.owners.ownership(store, &address, sharing.owner_ttl)?,
            Mode::Shared => None,
        };
        let (epoch, ownership) = match owned {
            Some(ownership) => {
                let ownership = Arc::new(ownership);
                let (Standing::Claimed { epoch } | Standing::Serving { epoch }) = ownership.check(tenant)?;
                (epoch, Some(ownership))
            }
            None => (0, None),
        };
        // A shared rate limit is one more round trip inside `propose`; such
        // a pool keeps to the one-call acquire.
        #[cfg(feature = "redis")]
        let wire = if config.policy.rate_limit.is_none() || epoch > 0 { store.wire(tenant, epoch) } else { None };
        let opened = store.providers(tenant, epoch, clock).and_then(|providers| {
            let releases = providers.fencing.releases();
            Pool::open(config, providers).map(|pool| (pool, releases))
        });
        let (pool, releases) = match opened {
            Ok(opened) => opened,
            Err(e) => {
                if let Some(ownership) = ownership {
                    // Nobody serves the tenant from here: let the next pool take it now.
                    ownership.resign_all();
                }
                return Err(e);
            }
        };
        let owner = ownership.map(|ownership| Owner { keeper: ownership.keep(), ownership, tenant: tenant.to_owned() });
        Ok(EmbeddedPool {
            pool,
            owner,
            #[cfg(feature = "redis")]
            wire,
            releases,
        })
    }

    /// Where this pool hears of the releases other processes make (see
    /// [`Releases`]), once: `None` after the first call, or where no other
    /// process grants.
    pub fn take_releases(&mut self) -> Option<Box<dyn Releases>> {
        self.releases.take()
    }

    /// The tenant's grants and revokes as bytes, for an application that
    /// runs them on a connection of its own event loop (see
    /// [`Exchange`](crate::providers::Exchange)); none unless the store is
    /// a plain-socket Redis and acquires need no other round trip.
    #[cfg(feature = "redis")]
    pub fn wire(&self) -> Option<&RedisWire> {
        self.wire.as_ref()
    }

    /// The pool, while this process may still serve its tenant: once the
    /// owner lease lapsed, another process may own the tenant.
    pub fn serve(&mut self) -> Result<&mut Pool> {
        if let Some(owner) = &self.owner {
            owner.ownership.serving(&owner.tenant)?;
        }
        Ok(&mut self.pool)
    }

    /// Gives the tenant up, so that the next owner takes it at once instead
    /// of after the owner TTL; a last checkpoint, if wanted, comes first.
    pub fn close(self) -> Option<Providers> {
        if let Some(Owner { ownership, keeper, .. }) = self.owner {
            ownership.resign_all();
            drop(keeper);
        }
        self.pool.close()
    }
}
