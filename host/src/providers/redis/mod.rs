//! Redis: the lease authority and command log for a tenant that many
//! processes serve together (shared mode).
//!
//! Every decision is one Lua script, run atomically by the server on its own
//! clock (`TIME`), never a read by the client followed by a write:
//!
//! - grant: no unexpired lease on the permit, then the next token from a
//!   fence key that is never deleted or expired, then the lease with its
//!   expiry (I1, I2, I6); a grant that claims usage limits is judged over
//!   the grants of the last minute and day of its resource, of the last
//!   minute of the acquire's context, and of the last minute and day of
//!   each of its groups, with the groups' live leases, and counted in each,
//!   in the same script (see `scripts::GRANT` for the keys);
//! - extend and revoke: only for the permit's current token;
//! - append: the next log position and the entry, in one step, so positions
//!   become visible in order; checkpoints are conditional like PostgreSQL's;
//! - the shared acquire rate limit: a GCRA on the server clock.
//!
//! Durability is Redis's: with `appendonly yes` and `appendfsync always` an
//! acknowledged grant or report survives a crash; with `everysec`, or on a
//! replica promoted while it was behind, the last writes can be lost. The
//! scripts that grant and extend notice: the tenant's generation record
//! names the server process (`run_id`) that last granted, and when another
//! one answers, nothing is granted until the leases the lost writes may have
//! held have expired, tokens start above the server's clock, and no lease
//! granted before extends (see `scripts::GENERATION`). Log positions are
//! never handed out below the highest one this process has seen.

mod resp;
mod scripts;
mod wire;

use std::sync::Arc;
use std::time::Duration;

use redis::{Client, Connection};
use repute_core::{Claim, Command, GrantAnswer, RateLimit, Window, SECOND};

use super::fencing::{Fencing, GroupCounts, Permit};
use super::storage::{decode_command, encode_command, Checkpoint, LogEntry, Storage};
use super::{Backend, Clock, Providers};
use crate::error::StoreError;

use scripts::Scripts;
pub use wire::{Address, Done, Exchange, RedisWire};

fn unavailable(e: impl std::fmt::Display) -> StoreError {
    StoreError::Unavailable(format!("redis: {e}"))
}

/// A script's error reply as the store error it stands for: `RECOVERING
/// <µs>` from a grant while the store's generation waits out the leases an
/// earlier history may have granted (see `scripts::GENERATION`).
fn script_error(message: &str) -> StoreError {
    let (code, detail) = message.split_once(' ').unwrap_or((message, ""));
    recovering(code, detail).unwrap_or_else(|| unavailable(message))
}

fn recovering(code: &str, detail: &str) -> Option<StoreError> {
    let us: u64 = detail.trim().parse().ok().filter(|_| code == "RECOVERING")?;
    Some(StoreError::Recovering { retry_after: us.saturating_mul(1_000) })
}

/// A Redis server that tenants live in.
#[derive(Clone)]
pub struct Redis {
    client: Client,
    confirm: Option<Confirm>,
}

/// How many replicas must hold a grant or a renewal before it counts
/// (`WAIT`), and for how long to wait for them: the store URL's
/// `wait_replicas` and `wait_ms`. A grant no replica set confirmed is
/// revoked and refused, so a failover to a replica can only lose grants
/// nobody was told of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Confirm {
    replicas: u32,
    timeout_ms: u64,
}

impl Confirm {
    /// `url` without repute's own parameters, and what they ask for.
    fn parse(url: &str) -> Result<(String, Option<Confirm>), StoreError> {
        let Some((base, query)) = url.split_once('?') else { return Ok((url.to_owned(), None)) };
        let (mut replicas, mut timeout_ms, mut kept) = (None, 100, Vec::new());
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let number = |v: &str| v.parse::<u64>().map_err(|_| unavailable(format!("store url: {pair}: a number")));
            match pair.split_once('=') {
                Some(("wait_replicas", v)) => replicas = Some(number(v)?.clamp(1, u64::from(u32::MAX)) as u32),
                Some(("wait_ms", v)) => timeout_ms = number(v)?.max(1),
                _ => kept.push(pair),
            }
        }
        let url = if kept.is_empty() { base.to_owned() } else { format!("{base}?{}", kept.join("&")) };
        Ok((url, replicas.map(|replicas| Confirm { replicas, timeout_ms })))
    }

    /// Waits for the replicas; an error when too few confirmed in time.
    fn wait(self, link: &mut Link, what: &str) -> Result<(), StoreError> {
        let acked: u64 = link.run(|c, _| redis::cmd("WAIT").arg(self.replicas).arg(self.timeout_ms).query(c))?;
        if acked < u64::from(self.replicas) {
            return Err(unavailable(format!(
                "{what} reached {acked} of {} replica(s) within {} ms (wait_replicas)",
                self.replicas, self.timeout_ms
            )));
        }
        Ok(())
    }
}

opaque_debug!(Redis, RedisStorage, RedisFencing);

impl Backend for Redis {
    fn open(url: &str) -> crate::error::Result<Redis> {
        Ok(Redis::connect(url)?)
    }

    fn is_shared(&self) -> bool {
        true
    }

    fn tenant_providers(&self, tenant: &str, epoch: u64, clock: Arc<dyn Clock>) -> crate::error::Result<Providers> {
        Ok(Providers::redis(self, tenant, epoch, clock))
    }

    /// Makes `epoch` the tenant's if it is higher than the stored one, so an
    /// owner chosen elsewhere fences this store's earlier writers.
    fn raise_epoch(&self, tenant: &str, epoch: u64) -> Result<(), StoreError> {
        let keys = Keys::new(tenant);
        self.link().run(|c, s| s.raise_epoch.key(&keys.epoch).arg(epoch).invoke::<i64>(c))?;
        Ok(())
    }

    /// Without `appendfsync always` a crash loses the last writes; with
    /// replicas and no `wait_replicas`, a failover loses what they lacked.
    fn durability(&self) -> Option<String> {
        let mut link = self.link();
        let persistence: String = link.run(|c, _| redis::cmd("INFO").arg("persistence").query(c)).ok()?;
        let replication: String = link.run(|c, _| redis::cmd("INFO").arg("replication").query(c)).ok()?;
        let field = |info: &str, name: &str| {
            info.lines().find_map(|l| l.strip_prefix(name).and_then(|v| v.strip_prefix(':'))).map(str::to_owned)
        };
        // Managed servers often refuse CONFIG: then the setting is unknown.
        let fsync: Option<Vec<String>> =
            link.run(|c, _| redis::cmd("CONFIG").arg("GET").arg("appendfsync").query(c)).ok();
        let fsync = fsync.and_then(|pair| pair.get(1).cloned());
        let replicas: u64 = field(&replication, "connected_slaves").and_then(|n| n.parse().ok()).unwrap_or(0);
        let mut lost = Vec::new();
        if field(&persistence, "aof_enabled").as_deref() != Some("1") {
            lost.push("appendonly is off: a restart loses what the last snapshot lacks".to_owned());
        } else if fsync.as_deref().is_some_and(|f| f != "always") {
            lost.push(format!("appendfsync is {}: a crash loses the last writes", fsync.unwrap_or_default()));
        }
        if replicas > 0 && self.confirm.is_none() {
            lost.push(format!("{replicas} replica(s) and no wait_replicas: a failover loses what they lacked"));
        }
        (!lost.is_empty()).then(|| lost.join("; "))
    }

    /// For a caller that owns the connection (see [`Exchange`]); none for
    /// a TLS server, nor when grants wait for replicas (`wait_replicas`):
    /// that caller runs the scripts and never waits.
    fn wire(&self, tenant: &str, epoch: u64) -> Option<RedisWire> {
        if self.confirm.is_some() {
            return None;
        }
        RedisWire::new(self.client.get_connection_info(), Keys::new(tenant), epoch)
    }
}

impl Redis {
    /// Checks `url` (`redis://host:port[/db][?wait_replicas=N[&wait_ms=M]]`)
    /// and that the server answers.
    pub fn connect(url: &str) -> Result<Redis, StoreError> {
        let (url, confirm) = Confirm::parse(url)?;
        let client = Client::open(url.as_str()).map_err(|e| unavailable(format!("store url: {e}")))?;
        let db = Redis { client, confirm };
        db.link().run(|c, _| redis::cmd("PING").query::<String>(c))?;
        Ok(db)
    }

    fn link(&self) -> Link {
        Link::to(self.client.clone())
    }

    /// The tenant's storage and lease authority, writing under `epoch` (0:
    /// shared mode).
    pub fn tenant(&self, tenant: &str, epoch: u64) -> (RedisStorage, RedisFencing) {
        let keys = Keys::new(tenant);
        (
            RedisStorage { link: self.link(), keys: keys.clone(), epoch, seen: 0 },
            RedisFencing { link: self.link(), keys, epoch, confirm: self.confirm },
        )
    }
}

/// One connection, opened again after it broke; calls time out after a few
/// seconds of silence, so a dead server is an error, not a hang.
struct Link {
    client: Client,
    conn: Option<Connection>,
    scripts: Scripts,
}

impl Link {
    /// A link to `client`'s server, connected at its first call.
    fn to(client: Client) -> Link {
        Link { client, conn: None, scripts: Scripts::new() }
    }

    fn run<T>(&mut self, f: impl FnOnce(&mut Connection, &Scripts) -> redis::RedisResult<T>) -> Result<T, StoreError> {
        if self.conn.is_none() {
            let timeout = Duration::from_secs(3);
            let conn = self.client.get_connection_with_timeout(timeout).map_err(unavailable)?;
            conn.set_read_timeout(Some(timeout)).map_err(unavailable)?;
            conn.set_write_timeout(Some(timeout)).map_err(unavailable)?;
            self.conn = Some(conn);
        }
        let conn = self.conn.as_mut().expect("connected above");
        f(conn, &self.scripts).map_err(|e| {
            // Only a refusal by the server leaves the connection usable.
            if e.is_io_error() || e.is_connection_dropped() || e.is_timeout() || e.is_unrecoverable_error() {
                self.conn = None;
            }
            e.code()
                .zip(e.detail())
                .and_then(|(code, detail)| recovering(code, detail))
                .unwrap_or_else(|| unavailable(e))
        })
    }
}

/// The keys of one tenant. The tenant sits in a hash tag so that every key
/// of a tenant lands on one node of a Redis cluster, as scripts require.
#[derive(Debug, Clone)]
struct Keys {
    prefix: String,
    epoch: String,
    seq: String,
    log: String,
    checkpoint: String,
    rate: String,
    /// The log position of the last change grants are judged against.
    changed: String,
    /// The store's history as the last grant found it (see `scripts::GENERATION`).
    generation: String,
    /// The pools waiting in a group's line, each until when (a hash): told
    /// of every release (see `scripts::REVOKE`).
    waiting: String,
    /// Where a waiting pool's wake-up list is: this, then its name.
    wake: String,
    /// This pool's name in lines and wake-ups (see `providers::pool_id`).
    pool: u64,
}

impl Keys {
    fn new(tenant: &str) -> Keys {
        let prefix = format!("repute:{{{tenant}}}:");
        Keys {
            epoch: format!("{prefix}epoch"),
            seq: format!("{prefix}seq"),
            log: format!("{prefix}log"),
            checkpoint: format!("{prefix}checkpoint"),
            rate: format!("{prefix}rate"),
            changed: format!("{prefix}changed"),
            generation: format!("{prefix}generation"),
            waiting: format!("{prefix}waiting"),
            wake: format!("{prefix}wake:"),
            pool: super::pool_id(),
            prefix,
        }
    }

    /// Fence counter and lease of one permit. Ids have no control
    /// characters, so the unit separator cannot be forged by a name.
    fn permit(&self, p: Permit<'_>) -> (String, String) {
        let name = format!("{}\u{1f}{}\u{1f}{}", p.kind, p.value, p.index);
        (format!("{}fence:{name}", self.prefix), format!("{}lease:{name}", self.prefix))
    }

    /// Usage, window and costs of the permit's resource (see `GRANT`):
    /// of its own scope, or of `context`'s. A context's name follows the
    /// resource's after one more separator, so no context's keys are
    /// another resource's.
    fn usage(&self, p: Permit<'_>, context: Option<&str>) -> [String; 3] {
        let name = match context {
            None => format!("{}\u{1f}{}", p.kind, p.value),
            Some(context) => format!("{}\u{1f}{}\u{1f}{context}", p.kind, p.value),
        };
        ["usage", "window", "costs"].map(|which| format!("{}{which}:{name}", self.prefix))
    }

    /// The day window of the permit's resource (see `GRANT`).
    fn day(&self, p: Permit<'_>) -> String {
        format!("{}day:{}\u{1f}{}", self.prefix, p.kind, p.value)
    }

    /// The permit's newest claimed grant (see `GRANT`).
    fn claimed(&self, p: Permit<'_>) -> String {
        format!("{}claimed:{}\u{1f}{}\u{1f}{}", self.prefix, p.kind, p.value, p.index)
    }

    /// Usage, minute, day and leases of group `name`, the tenant's (see `GRANT`).
    fn group(&self, name: &str) -> [String; 4] {
        ["group", "gminute", "gday", "gleases"].map(|which| format!("{}{which}:{name}", self.prefix))
    }
}

/// The grant script's keys and arguments for a grant of `permit` (see `GRANT`).
fn grant_call(
    keys: &Keys,
    permit: Permit<'_>,
    ttl: u64,
    last: u64,
    epoch: u64,
    claim: Option<&Claim>,
    view: u64,
) -> (Vec<String>, Vec<u64>) {
    let (fence, lease) = keys.permit(permit);
    let context = context_args(claim);
    let mut k = vec![keys.epoch.clone(), fence, lease];
    k.extend(keys.usage(permit, None));
    k.extend(keys.usage(permit, context.map(|(name, _)| name)));
    k.push(keys.day(permit));
    k.push(keys.claimed(permit));
    let mut a = vec![micros(ttl), last, epoch];
    a.extend(claim_args(claim));
    a.push(u64::from(permit.index));
    a.push(u64::from(context.is_some()));
    a.extend(context.map_or([0; 3], |(_, args)| args));
    let limits = claim.map(|c| c.limits).unwrap_or_default();
    a.extend([limits.rpd.map_or(0, u64::from), limits.tpd.unwrap_or(0)]);
    let groups = claim.map_or(&[][..], |c| &c.groups[..]);
    a.push(groups.len() as u64);
    for g in groups {
        k.extend(keys.group(g.name.as_str()));
        let l = &g.limits;
        a.extend([
            l.rpm.map_or(0, u64::from),
            l.tpm.unwrap_or(0),
            l.min_interval.map_or(0, micros_up),
            l.rpd.map_or(0, u64::from),
            l.tpd.unwrap_or(0),
            g.concurrency.map_or(0, u64::from),
        ]);
    }
    k.push(keys.waiting.clone());
    k.push(keys.seq.clone());
    k.push(keys.generation.clone());
    k.push(keys.changed.clone());
    a.push(keys.pool);
    a.push(view);
    (k, a)
}

/// A pool's wake-up list, read on a connection of its own: the revoke
/// script pushes to it while the pool waits in a line (see `scripts::REVOKE`).
struct RedisReleases {
    link: Link,
    list: String,
}

impl super::Releases for RedisReleases {
    /// A blocking pop, bounded by the server (whole milliseconds, and
    /// shorter than a call's read timeout).
    fn next(&mut self, at_most: Duration) -> Result<bool, StoreError> {
        let seconds = at_most.as_millis().clamp(1, 2_000) as f64 / 1_000.0;
        let list = &self.list;
        let popped: Option<(String, String)> =
            self.link.run(|c, _| redis::cmd("BLPOP").arg(list).arg(seconds).query(c))?;
        Ok(popped.is_some())
    }
}

/// Checkpoints and the command log of one tenant.
pub struct RedisStorage {
    link: Link,
    keys: Keys,
    epoch: u64,
    /// Highest log position this process has seen: positions handed out
    /// after a data loss start above it.
    seen: u64,
}

/// The tenant's permits as the lease authority.
pub struct RedisFencing {
    link: Link,
    keys: Keys,
    epoch: u64,
    confirm: Option<Confirm>,
}

type Fields = (Option<u64>, Option<u64>, Option<u64>, Option<Vec<u8>>);

impl Storage for RedisStorage {
    fn load(&mut self) -> Result<Option<Checkpoint>, StoreError> {
        let key = self.keys.checkpoint.clone();
        let (epoch, version, log_seq, bytes): Fields = self.link.run(|c, _| {
            redis::cmd("HMGET").arg(&key).arg("epoch").arg("version").arg("log_seq").arg("bytes").query(c)
        })?;
        Ok(match (epoch, version, log_seq, bytes) {
            (Some(epoch), Some(version), Some(log_seq), Some(bytes)) => {
                self.seen = self.seen.max(log_seq);
                Some(Checkpoint { epoch, version, log_seq, bytes })
            }
            _ => None,
        })
    }

    fn save(&mut self, bytes: &[u8], expected_version: u64, log_seq: u64) -> Result<u64, StoreError> {
        let (keys, epoch) = (&self.keys, self.epoch);
        let (status, found): (String, u64) = self.link.run(|c, s| {
            s.save
                .key(&keys.epoch)
                .key(&keys.checkpoint)
                .key(&keys.log)
                .arg(epoch)
                .arg(expected_version)
                .arg(log_seq)
                .arg(bytes)
                .invoke(c)
        })?;
        match status.as_str() {
            "ok" => Ok(found),
            "stale_epoch" => Err(StoreError::StaleEpoch { mine: epoch, stored: found }),
            _ => Err(StoreError::Conflict { expected: expected_version, found }),
        }
    }

    fn append(&mut self, command: &Command) -> Result<u64, StoreError> {
        let entry = encode_command(command)?;
        let (keys, epoch, floor) = (&self.keys, self.epoch, self.seen + 1);
        let changes = u8::from(command.changes_grants());
        let (ok, value): (u64, u64) = self.link.run(|c, s| {
            s.append
                .key(&keys.epoch)
                .key(&keys.seq)
                .key(&keys.log)
                .key(&keys.changed)
                .arg(entry)
                .arg(epoch)
                .arg(floor)
                .arg(changes)
                .invoke(c)
        })?;
        if ok == 0 {
            return Err(StoreError::StaleEpoch { mine: epoch, stored: value });
        }
        self.seen = self.seen.max(value);
        Ok(value)
    }

    fn read_log(&mut self, after: u64, limit: u32) -> Result<Vec<LogEntry>, StoreError> {
        let key = self.keys.log.clone();
        let rows: Vec<(String, Vec<(String, String)>)> = self.link.run(|c, _| {
            redis::cmd("XRANGE").arg(&key).arg(format!("(0-{after}")).arg("+").arg("COUNT").arg(limit).query(c)
        })?;
        let mut out = Vec::with_capacity(rows.len());
        for (id, fields) in rows {
            let seq = id
                .strip_prefix("0-")
                .and_then(|s| s.parse::<u64>().ok())
                .ok_or_else(|| unavailable(format!("log entry id {id:?}")))?;
            let entry = fields
                .into_iter()
                .find(|(f, _)| f == "e")
                .ok_or_else(|| unavailable(format!("log entry {id} has no body")))?
                .1;
            self.seen = self.seen.max(seq);
            out.push(LogEntry { seq, command: decode_command(seq, &entry)? });
        }
        Ok(out)
    }
}

fn micros(ns: u64) -> u64 {
    ns / 1_000
}

/// Rounded up: a gap the server may not shorten.
fn micros_up(ns: u64) -> u64 {
    ns.div_ceil(1_000)
}

/// The claim's arguments of the grant script (see `GRANT`): `1` when the
/// resource's own limits count the grant, those limits (0 for none) and
/// the cost; all 0 without a claim.
pub(super) fn claim_args(claim: Option<&Claim>) -> [u64; 6] {
    match claim {
        None => [0; 6],
        Some(Claim { limits, cost, .. }) => [
            u64::from(limits.counted()),
            limits.rpm.map_or(0, u64::from),
            limits.tpm.unwrap_or(0),
            limits.min_interval.map_or(0, micros_up),
            limits.max_uses.unwrap_or(0),
            *cost,
        ],
    }
}

/// The context a claim is counted in apart, if any, and the grant
/// script's arguments of its limits (0 for none).
pub(super) fn context_args(claim: Option<&Claim>) -> Option<(&str, [u64; 3])> {
    let claim = claim?;
    let limits = &claim.limits.per_context;
    let args = [limits.rpm.map_or(0, u64::from), limits.tpm.unwrap_or(0), limits.min_interval.map_or(0, micros_up)];
    claim.context.as_ref().map(|context| (context.as_str(), args))
}

/// The grant script's reply when the grant's view is behind the log's last
/// change of registrations or groups; a wait is never this short.
const STALE: i64 = -1;

/// The grant script's reply (see `GRANT`).
pub(super) fn grant_answer(reply: Option<i64>) -> GrantAnswer {
    match reply {
        Some(token) if token > 0 => GrantAnswer::Granted(token as u64),
        Some(0) => GrantAnswer::Limited(None),
        Some(STALE) => GrantAnswer::Stale,
        Some(wait) => {
            let (wait, code) = (wait.unsigned_abs() / 16, wait.unsigned_abs() % 16);
            let wait_ns = wait.saturating_mul(1_000);
            match code {
                0 => GrantAnswer::Limited(Some(wait_ns)),
                1 => GrantAnswer::ContextLimited(wait_ns),
                group => GrantAnswer::GroupLimited(group as u32 - 2, wait_ns),
            }
        }
        None => GrantAnswer::Held,
    }
}

impl Fencing for RedisFencing {
    fn grant(
        &mut self,
        permit: Permit<'_>,
        ttl: u64,
        last: u64,
        _now: u64,
        claim: Option<&Claim>,
        view: u64,
    ) -> Result<GrantAnswer, StoreError> {
        let (keys, args) = grant_call(&self.keys, permit, ttl, last, self.epoch, claim, view);
        let reply: Option<i64> = self.link.run(|c, s| s.grant.key(&keys[..]).arg(&args[..]).invoke(c))?;
        let answer = grant_answer(reply);
        if let (GrantAnswer::Granted(token), Some(confirm)) = (answer, self.confirm) {
            if let Err(e) = confirm.wait(&mut self.link, "the grant") {
                let _ = self.revoke(permit, token);
                return Err(e);
            }
        }
        Ok(answer)
    }

    fn reconcile(
        &mut self,
        permit: Permit<'_>,
        context: Option<&str>,
        token: u64,
        reserved: u64,
        used: u64,
    ) -> Result<(), StoreError> {
        let claimed = self.keys.claimed(permit);
        let mut keys = vec![claimed.clone(), self.keys.day(permit)];
        keys.extend(self.keys.usage(permit, None));
        if let Some(context) = context {
            keys.extend(self.keys.usage(permit, Some(context)));
        }
        let scopes = 1 + u64::from(context.is_some());
        let member = format!("{}:{token}", permit.index);
        self.link.run(|c, s| {
            // The group windows of the permit's claimed grant: fixed for as
            // long as its token is this one, which the script checks.
            let windows: Option<String> = redis::cmd("HGET").arg(&claimed).arg("windows").query(c)?;
            let mut keys = keys.clone();
            keys.extend(windows.iter().flat_map(|w| w.split('\u{1e}')).filter(|w| !w.is_empty()).map(str::to_owned));
            s.reconcile.key(&keys[..]).arg(&member).arg(used).arg(reserved).arg(token).arg(scopes).invoke::<i64>(c)
        })?;
        Ok(())
    }

    /// One script for the whole list, on the server's clock.
    fn window(&mut self, resources: &[(&str, &str)], _now: u64) -> Result<Vec<Window>, StoreError> {
        if resources.is_empty() {
            return Ok(Vec::new());
        }
        let keys: Vec<[String; 3]> =
            resources.iter().map(|&(kind, value)| self.keys.usage(Permit { kind, value, index: 0 }, None)).collect();
        let counts: Vec<u64> = self.link.run(|c, s| {
            let mut call = s.window.prepare_invoke();
            for [_, window, costs] in &keys {
                call.key(window).key(costs);
            }
            call.invoke(c)
        })?;
        Ok(counts.chunks_exact(2).map(|p| Window { grants: p[0], tokens: p[1] }).collect())
    }

    /// One script for the whole list, on the server's clock.
    fn groups(&mut self, names: &[&str], _now: u64) -> Result<Vec<GroupCounts>, StoreError> {
        let keys: Vec<String> = names
            .iter()
            .flat_map(|name| {
                let [_, minute, day, leases] = self.keys.group(name);
                [minute, day, leases]
            })
            .collect();
        let counts: Vec<u64> = self.link.run(|c, s| s.groups.key(&keys[..]).invoke(c))?;
        Ok(counts
            .chunks_exact(5)
            .map(|c| GroupCounts {
                minute: Window { grants: c[0], tokens: c[1] },
                day: Window { grants: c[2], tokens: c[3] },
                leased: c[4] as u32,
            })
            .collect())
    }

    fn extend(&mut self, permit: Permit<'_>, token: u64, ttl: u64, _now: u64) -> Result<bool, StoreError> {
        if token == 0 {
            return Ok(false);
        }
        let (fence, lease) = self.keys.permit(permit);
        let generation = &self.keys.generation;
        let extended: i64 = self
            .link
            .run(|c, s| s.extend.key(&fence).key(&lease).key(generation).arg(token).arg(micros(ttl)).invoke(c))?;
        if let (1, Some(confirm)) = (extended, self.confirm) {
            confirm.wait(&mut self.link, "the renewal")?;
        }
        Ok(extended == 1)
    }

    fn revoke(&mut self, permit: Permit<'_>, token: u64) -> Result<(), StoreError> {
        let (_, lease) = self.keys.permit(permit);
        let keys = &self.keys;
        self.link.run(|c, s| {
            s.revoke.key(&lease).key(&keys.waiting).arg(token).arg(&keys.wake).arg(keys.pool).invoke::<i64>(c)
        })?;
        Ok(())
    }

    fn releases(&self) -> Option<Box<dyn super::Releases>> {
        let list = format!("{}{}", self.keys.wake, self.keys.pool);
        Some(Box::new(RedisReleases { link: Link::to(self.link.client.clone()), list }))
    }

    /// One script over the permits' lease keys, on the server's clock.
    fn live(&mut self, kind: &str, value: &str, first: u32, permits: u32, _now: u64) -> Result<u32, StoreError> {
        if first >= permits {
            return Ok(0);
        }
        let leases: Vec<String> =
            (first..permits).map(|index| self.keys.permit(Permit { kind, value, index }).1).collect();
        let live: i64 = self.link.run(|c, s| s.live.key(&leases[..]).invoke(c))?;
        Ok(live as u32)
    }

    /// Shared mode only: an owner's own bucket is already exact.
    fn admit(&mut self, limit: &RateLimit) -> Result<Option<u64>, StoreError> {
        if self.epoch != 0 {
            return Ok(None);
        }
        let interval = (SECOND as f64 / limit.rate / 1_000.0).ceil() as u64;
        let tolerance = interval.saturating_mul(limit.burst as u64);
        let key = &self.keys.rate;
        let wait_us: u64 = self.link.run(|c, s| s.admit.key(key).arg(interval).arg(tolerance).invoke(c))?;
        Ok((wait_us > 0).then(|| wait_us * 1_000))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_url_names_how_many_replicas_a_grant_waits_for() {
        assert_eq!(Confirm::parse("redis://h:1/2").unwrap(), ("redis://h:1/2".into(), None));
        let (url, confirm) = Confirm::parse("redis://h:1/2?wait_replicas=1&protocol=resp2").unwrap();
        assert_eq!(
            (url.as_str(), confirm),
            ("redis://h:1/2?protocol=resp2", Some(Confirm { replicas: 1, timeout_ms: 100 }))
        );
        let (url, confirm) = Confirm::parse("redis://h:1?wait_ms=20&wait_replicas=2").unwrap();
        assert_eq!((url.as_str(), confirm), ("redis://h:1", Some(Confirm { replicas: 2, timeout_ms: 20 })));
        assert_eq!(Confirm::parse("redis://h:1?wait_ms=20").unwrap().1, None, "no replicas asked for, no wait");
        let bad = Confirm::parse("redis://h:1?wait_replicas=some").unwrap_err();
        assert_eq!(bad, StoreError::Unavailable("redis: store url: wait_replicas=some: a number".into()));
    }
}
