//! Owner leases of tenants in etcd (sharded mode), for deployments that
//! already run etcd for coordination and keep PostgreSQL for the data.
//!
//! A tenant's owner is the key `repute/owner/<tenant>`, attached to an etcd
//! lease of the owner TTL. The key is only ever created by a transaction
//! guarded by `create_revision == 0`, so at most one process holds it, and
//! its create revision — etcd's global revision counter, which never goes
//! back — is the owner epoch: every takeover yields a higher one, and
//! PostgreSQL (`Postgres::raise_epoch`) refuses the writes of every earlier
//! owner with it. Expiry is judged by the etcd leader's clock; this process
//! only counts its own deadline (send time + TTL − margin) on its own clock.
//!
//! etcd is touched on claim, renewal and resignation only. A watch on the
//! key prefix keeps a picture of who holds what, so a request for a tenant
//! owned elsewhere is answered without a round trip, and a tenant this
//! process was turned away from is reported vacated the moment its key is
//! deleted (resignation or lease expiry), to be claimed at once.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use etcd_client::{
    Client, Compare, CompareOp, ConnectOptions, DeleteOptions, EventType, GetOptions, KeyValue, PutOptions, Txn, TxnOp,
    TxnOpResponse, WatchOptions,
};
use serde::{Deserialize, Serialize};
use tokio::runtime::Runtime;

use super::owners::{owner_margin, Claim, OwnerStore};
use crate::error::StoreError;

const PREFIX: &str = "repute/owner/";

/// How long a resignation or the first contact may take; claims and
/// renewals get until their answer would be useless (TTL − margin).
const SLOW: Duration = Duration::from_secs(5);

/// Pause between attempts to re-establish the watch.
const REWATCH: Duration = Duration::from_millis(500);

fn key(tenant: &str) -> String {
    format!("{PREFIX}{tenant}")
}

/// The owner key's value.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Holder {
    owner: String,
    address: String,
}

impl Holder {
    fn read(kv: &KeyValue) -> Holder {
        serde_json::from_slice(kv.value()).unwrap_or_else(|_| Holder {
            owner: String::from_utf8_lossy(kv.value()).into_owned(),
            address: String::new(),
        })
    }
}

/// etcd leases are whole seconds: the owner TTL is rounded up (at least
/// 1 s; etcd may raise it further to its minimum lease TTL). The local
/// deadline keeps using the unrounded TTL, so it still falls before the
/// lease can run out at etcd; a dead owner's tenants move after the longer
/// etcd TTL.
fn lease_seconds(ttl: Duration) -> i64 {
    let whole = ttl.as_secs() + u64::from(ttl.subsec_nanos() > 0);
    whole.clamp(1, i64::MAX as u64) as i64
}

fn unavailable(e: impl std::fmt::Display) -> StoreError {
    StoreError::Unavailable(format!("etcd: {e}"))
}

/// What the watch has seen.
#[derive(Debug, Default)]
struct Sight {
    /// The watch is established and caught up: `held` can answer for etcd.
    live: bool,
    held: HashMap<String, Holder>,
    /// Tenants this process was turned away from, not yet released.
    refused: HashSet<String>,
    /// Refused tenants whose owner key has since been deleted.
    vacated: Vec<String>,
}

impl Sight {
    fn release(&mut self, tenant: &str) {
        self.held.remove(tenant);
        if self.refused.remove(tenant) {
            self.vacated.push(tenant.to_owned());
        }
    }
}

fn lock(sight: &Mutex<Sight>) -> MutexGuard<'_, Sight> {
    sight.lock().unwrap_or_else(|p| p.into_inner())
}

/// Owner leases in etcd. The callers are plain threads (or tokio's blocking
/// pool), so each call runs to completion on a runtime of its own; the
/// watch runs on a thread with another one, so a stalled watch never holds
/// up a renewal.
pub struct EtcdOwners {
    runtime: Option<Runtime>,
    client: Client,
    sight: Arc<Mutex<Sight>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    watcher: Option<JoinHandle<()>>,
}

opaque_debug!(EtcdOwners);

fn new_runtime() -> Result<Runtime, StoreError> {
    tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(unavailable)
}

fn options() -> ConnectOptions {
    // HTTP/2 pings let a watch on a dead connection fail, so the picture of
    // the owners is dropped rather than trusted while it can no longer change.
    ConnectOptions::new()
        .with_connect_timeout(Duration::from_secs(2))
        .with_keep_alive(Duration::from_secs(1), Duration::from_secs(2))
        .with_keep_alive_while_idle(true)
}

impl EtcdOwners {
    /// Connects to the etcd cluster at `endpoints` (`http://host:port`) and
    /// checks that it answers; starts the watch.
    pub fn connect(endpoints: &[String]) -> Result<EtcdOwners, StoreError> {
        let runtime = new_runtime()?;
        let client = runtime.block_on(async {
            let mut client = Client::connect(endpoints, Some(options())).await.map_err(unavailable)?;
            let probe = client.get(PREFIX, Some(GetOptions::new().with_prefix().with_count_only()));
            tokio::time::timeout(SLOW, probe)
                .await
                .map_err(|_| unavailable(format!("no answer from {} within {SLOW:?}", endpoints.join(","))))?
                .map_err(unavailable)?;
            Ok::<_, StoreError>(client)
        })?;
        let sight = Arc::new(Mutex::new(Sight::default()));
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let watcher = {
            let (endpoints, sight) = (endpoints.to_vec(), sight.clone());
            std::thread::Builder::new()
                .name("repute-etcd-watch".into())
                .spawn(move || {
                    if let Ok(rt) = new_runtime() {
                        rt.block_on(watch(endpoints, sight, stopped));
                    }
                })
                .map_err(unavailable)?
        };
        Ok(EtcdOwners { runtime: Some(runtime), client, sight, stop: Some(stop), watcher: Some(watcher) })
    }

    /// Runs `op` against etcd, giving up after `limit`.
    fn run<T, F>(&self, limit: Duration, op: F) -> Result<T, StoreError>
    where
        F: Future<Output = Result<T, etcd_client::Error>>,
    {
        let runtime = self.runtime.as_ref().expect("the runtime lives until drop");
        runtime.block_on(async {
            match tokio::time::timeout(limit, op).await {
                Ok(r) => r.map_err(unavailable),
                Err(_) => Err(unavailable(format!("no answer within {limit:?}"))),
            }
        })
    }

    fn refused(&self, tenant: &str, holder: Holder) -> Claim {
        lock(&self.sight).refused.insert(tenant.to_owned());
        Claim::Elsewhere { owner: holder.owner, address: holder.address }
    }
}

/// Keeps `sight` in step with the owner keys until `stopped` fires:
/// lists them, then follows every change from the revision listed.
async fn watch(endpoints: Vec<String>, sight: Arc<Mutex<Sight>>, mut stopped: tokio::sync::oneshot::Receiver<()>) {
    loop {
        tokio::select! {
            _ = follow(&endpoints, &sight) => {}
            _ = &mut stopped => return,
        }
        lock(&sight).live = false;
        tokio::select! {
            _ = tokio::time::sleep(REWATCH) => {}
            _ = &mut stopped => return,
        }
    }
}

/// One watch session; returns when it breaks.
async fn follow(endpoints: &[String], sight: &Mutex<Sight>) -> Result<(), etcd_client::Error> {
    let mut client = Client::connect(endpoints, Some(options())).await?;
    let listed = client.get(PREFIX, Some(GetOptions::new().with_prefix())).await?;
    let revision = listed.header().map_or(0, |h| h.revision());
    let opts = WatchOptions::new().with_prefix().with_start_revision(revision + 1);
    let mut stream = client.watch(PREFIX, Some(opts)).await?;
    {
        let mut s = lock(sight);
        let now: HashMap<String, Holder> = listed
            .kvs()
            .iter()
            .filter_map(|kv| Some((kv.key_str().ok()?.strip_prefix(PREFIX)?.to_owned(), Holder::read(kv))))
            .collect();
        // Keys deleted while the watch was down.
        let gone: Vec<String> = s.refused.iter().filter(|t| !now.contains_key(*t)).cloned().collect();
        for t in gone {
            s.release(&t);
        }
        s.held = now;
        s.live = true;
    }
    while let Some(reply) = stream.message().await? {
        if reply.canceled() {
            return Ok(());
        }
        let mut s = lock(sight);
        for event in reply.events() {
            let Some(kv) = event.kv() else { continue };
            let Some(tenant) = kv.key_str().ok().and_then(|k| k.strip_prefix(PREFIX)) else { continue };
            match event.event_type() {
                EventType::Put => {
                    s.held.insert(tenant.to_owned(), Holder::read(kv));
                }
                EventType::Delete => s.release(tenant),
            }
        }
    }
    Ok(())
}

impl OwnerStore for EtcdOwners {
    fn claim(&mut self, tenant: &str, owner: &str, address: &str, ttl: Duration) -> Result<Claim, StoreError> {
        {
            let s = lock(&self.sight);
            if let Some(h) = s.held.get(tenant).filter(|h| s.live && h.owner != owner) {
                let h = h.clone();
                drop(s);
                return Ok(self.refused(tenant, h));
            }
        }
        let limit = ttl - owner_margin(ttl);
        let sent = Instant::now();
        let value = serde_json::to_vec(&Holder { owner: owner.to_owned(), address: address.to_owned() })
            .map_err(unavailable)?;
        let k = key(tenant);
        let mut client = self.client.clone();
        let (lease, reply) = self.run(limit, async {
            let lease = client.lease_grant(lease_seconds(ttl), None).await?.id();
            let txn = Txn::new()
                .when([Compare::create_revision(k.as_str(), CompareOp::Equal, 0)])
                .and_then([
                    TxnOp::put(k.as_str(), value, Some(PutOptions::new().with_lease(lease))),
                    TxnOp::get(k.as_str(), None),
                ])
                .or_else([TxnOp::get(k.as_str(), None)]);
            Ok((lease, client.txn(txn).await?))
        })?;
        let found = reply.op_responses().into_iter().find_map(|r| match r {
            TxnOpResponse::Get(g) => g.kvs().first().cloned(),
            _ => None,
        });
        let Some(kv) = found else {
            return Err(unavailable(format!("{k}: the transaction read no key")));
        };
        if reply.succeeded() {
            lock(&self.sight).refused.remove(tenant);
            let epoch = kv.create_revision() as u64;
            return Ok(Claim::Owned { epoch, deadline: sent + ttl - owner_margin(ttl) });
        }
        // The unused lease would lapse by itself; revoking it spares etcd.
        let _ = self.run(SLOW, client.lease_revoke(lease));
        Ok(self.refused(tenant, Holder::read(&kv)))
    }

    fn renew(&mut self, tenant: &str, _owner: &str, epoch: u64, ttl: Duration) -> Result<Option<Instant>, StoreError> {
        let limit = ttl - owner_margin(ttl);
        let sent = Instant::now();
        let k = key(tenant);
        let mut client = self.client.clone();
        self.run(limit, async {
            let got = client.get(k.as_str(), None).await?;
            let Some(kv) = got.kvs().first().filter(|kv| kv.create_revision() as u64 == epoch) else {
                return Ok(None);
            };
            match client.lease_keep_alive(kv.lease()).await {
                // The key is ours and its lease was just extended by a full
                // etcd TTL, counted from after `sent`.
                Ok(_) => Ok(Some(sent + ttl - owner_margin(ttl))),
                // Not found: it lapsed between the read and the keep-alive.
                Err(etcd_client::Error::LeaseKeepAliveError(_)) => Ok(None),
                Err(e) => Err(e),
            }
        })
    }

    fn owner(&mut self, tenant: &str) -> Result<Option<String>, StoreError> {
        let k = key(tenant);
        let mut client = self.client.clone();
        self.run(SLOW, async {
            let got = client.get(k.as_str(), None).await?;
            Ok(got.kvs().first().map(|kv| Holder::read(kv).address))
        })
    }

    fn resign(&mut self, tenant: &str, _owner: &str, epoch: u64) -> Result<(), StoreError> {
        let k = key(tenant);
        let mut client = self.client.clone();
        self.run(SLOW, async {
            let txn = Txn::new()
                .when([Compare::create_revision(k.as_str(), CompareOp::Equal, epoch as i64)])
                .and_then([TxnOp::delete(k.as_str(), Some(DeleteOptions::new().with_prev_key()))]);
            let reply = client.txn(txn).await?;
            let lease = reply.op_responses().into_iter().find_map(|r| match r {
                TxnOpResponse::Delete(d) => d.prev_kvs().first().map(KeyValue::lease),
                _ => None,
            });
            if let Some(lease) = lease.filter(|l| *l != 0) {
                client.lease_revoke(lease).await?;
            }
            Ok(())
        })
    }

    fn vacated(&mut self) -> Vec<String> {
        std::mem::take(&mut lock(&self.sight).vacated)
    }
}

impl Drop for EtcdOwners {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(watcher) = self.watcher.take() {
            let _ = watcher.join();
        }
        // Dropping a runtime blocks, which tokio forbids inside another
        // runtime (a server shutting down): let it wind down in the background.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}
