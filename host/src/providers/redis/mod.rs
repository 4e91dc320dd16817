//! Redis: the lease authority and command log for a tenant that many
//! processes serve together (shared mode).
//!
//! Every decision is one Lua script, run atomically by the server on its own
//! clock (`TIME`), never a read by the client followed by a write:
//!
//! - grant: no unexpired lease on the permit, then the next token from a
//!   fence key that is never deleted or expired, then the lease with its
//!   expiry (I1, I2, I6); a grant that claims usage limits is judged over
//!   the grants of the last minute of its resource and of the acquire's
//!   context, and counted in both, in the same script;
//! - extend and revoke: only for the permit's current token;
//! - append: the next log position and the entry, in one step, so positions
//!   become visible in order; checkpoints are conditional like PostgreSQL's;
//! - the shared acquire rate limit: a GCRA on the server clock.
//!
//! Durability is Redis's: with `appendonly yes` and `appendfsync always` an
//! acknowledged grant or report survives a crash; with `everysec` the last
//! second can be lost. Tokens still never go back after such a loss: every
//! grant takes the larger of the stored counter and the highest token the
//! pool itself has seen (from its checkpoint and its own grants), and a
//! lease restored from a checkpoint re-adopts its permit. Log positions are
//! likewise never handed out below the highest one this process has seen.

mod wire;

use std::sync::Arc;
use std::time::Duration;

use redis::{Client, Connection, Script};
use repute_core::{Claim, Command, GrantAnswer, RateLimit, SECOND};

use super::fencing::{Fencing, Permit};
use super::storage::{decode_command, encode_command, Checkpoint, LogEntry, Storage};
use super::{Backend, Clock, Providers};
use crate::error::StoreError;

pub use wire::{Address, Done, Exchange, RedisWire};

fn unavailable(e: impl std::fmt::Display) -> StoreError {
    StoreError::Unavailable(format!("redis: {e}"))
}

/// At the top of every script: integers written without an exponent
/// (Lua's default number format switches to one above 1e14).
const PRELUDE: &str = "local function int(x) return string.format('%d', x) end
";

/// The server's clock in microseconds, for the scripts that judge time.
const NOW: &str = "local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
";

/// KEYS: epoch, fence, lease, then the usage of each scope the claim counts
/// in: the resource's own and, when the claim names a context, that
/// context's (see `Keys::usage`). A scope's usage is three keys: usage (a
/// hash: `uses`, `last` µs, `tokens` of the window), window (a sorted set of
/// `permit:token` by grant time, µs) and costs (a hash `permit:token` → the
/// tokens that grant counts). ARGV: ttl µs, last token seen by the pool,
/// writer epoch, then the claim (0 for a limit not set, all 0 without a
/// claim): `1` when the resource's own limits count the grant, its rpm,
/// tpm, min_interval µs (rounded up), max_uses, and the cost; then the
/// permit's index; then, with the context's keys only, the context's rpm,
/// tpm and min_interval µs (rounded up).
///
/// The resource's scope is judged first; both must admit the grant, which
/// is then counted in both. Returns the token; nil when the permit is held
/// (or the epoch is stale, or the cost can never fit a tpm: nothing
/// counted); 0 when max_uses are spent; a wait as a negative number,
/// `-2 µs` until the resource's limits admit the grant and `-(2 µs + 1)`
/// until the context's do (odd: the resource's other contexts may still be
/// granted). A scope's window and costs expire a minute after its newest
/// grant, when every grant in them has left the window anyway. Pruning
/// writes the scope's `tokens` back at once, refused or not: the pruned
/// costs are gone, and a count still holding them would refuse the scope
/// until its window expired.
const GRANT: &str = "
if ARGV[3] ~= '0' and redis.call('GET', KEYS[1]) ~= ARGV[3] then return false end
local held = redis.call('GET', KEYS[3])
if held then
  local sep = string.find(held, ':', 1, true)
  if tonumber(string.sub(held, sep + 1)) > now then return false end
end
local cost = tonumber(ARGV[9])
local function scope(k, rpm, tpm, gap, max_uses, context)
  return {usage = KEYS[k], window = KEYS[k + 1], costs = KEYS[k + 2], rpm = tonumber(rpm), tpm = tonumber(tpm),
    gap = tonumber(gap), max_uses = tonumber(max_uses), context = context, uses = 0, last = -1, tokens = 0}
end
local scopes = {}
if ARGV[4] == '1' then table.insert(scopes, scope(4, ARGV[5], ARGV[6], ARGV[7], ARGV[8], false)) end
if #KEYS == 9 then table.insert(scopes, scope(7, ARGV[11], ARGV[12], ARGV[13], '0', true)) end
-- Prunes scope s and judges the grant there: nil when it admits it, else
-- 'spent', 'held' or the µs until it may.
local function judge(s)
  local u = redis.call('HMGET', s.usage, 'uses', 'last', 'tokens')
  s.uses, s.last = tonumber(u[1] or '0'), tonumber(u[2] or '-1')
  if s.max_uses > 0 and s.uses >= s.max_uses then return 'spent' end
  if s.tpm > 0 and cost > s.tpm then return 'held' end
  if redis.call('EXISTS', s.window) == 1 then s.tokens = tonumber(u[3] or '0') end
  local cutoff = int(now - 60000000)
  local old = redis.call('ZRANGEBYSCORE', s.window, '-inf', cutoff)
  for i = 1, #old, 1000 do
    local chunk = {unpack(old, i, math.min(i + 999, #old))}
    for _, c in ipairs(redis.call('HMGET', s.costs, unpack(chunk))) do s.tokens = s.tokens - tonumber(c or '0') end
    redis.call('HDEL', s.costs, unpack(chunk))
  end
  if #old > 0 then
    redis.call('ZREMRANGEBYSCORE', s.window, '-inf', cutoff)
    redis.call('HSET', s.usage, 'tokens', int(s.tokens))
  end
  local free = now
  if s.gap > 0 and s.last >= 0 then free = math.max(free, s.last + s.gap) end
  local n = redis.call('ZCARD', s.window)
  if s.rpm > 0 and n >= s.rpm then
    local leaves = redis.call('ZRANGE', s.window, int(n - s.rpm), int(n - s.rpm), 'WITHSCORES')
    free = math.max(free, tonumber(leaves[2]) + 60000000)
  end
  if s.tpm > 0 and s.tokens + cost > s.tpm then
    local needed, freed = s.tokens + cost - s.tpm, 0
    local oldest = redis.call('ZRANGE', s.window, 0, -1, 'WITHSCORES')
    for i = 1, #oldest, 2 do
      freed = freed + tonumber(redis.call('HGET', s.costs, oldest[i]) or '0')
      if freed >= needed then
        free = math.max(free, tonumber(oldest[i + 1]) + 60000000)
        break
      end
    end
  end
  if free > now then return free - now end
  return nil
end
for _, s in ipairs(scopes) do
  local refused = judge(s)
  if refused == 'spent' then return 0 end
  if refused == 'held' then return false end
  if refused then
    if s.context then return -(2 * refused + 1) end
    return -2 * refused
  end
end
local token = math.max(tonumber(redis.call('GET', KEYS[2]) or '0'), tonumber(ARGV[2])) + 1
redis.call('SET', KEYS[2], int(token))
redis.call('SET', KEYS[3], int(token) .. ':' .. int(now + tonumber(ARGV[1])))
local member = ARGV[10] .. ':' .. int(token)
for _, s in ipairs(scopes) do
  if s.rpm > 0 or s.tpm > 0 then
    s.tokens = s.tokens + cost
    redis.call('ZADD', s.window, int(now), member)
    redis.call('HSET', s.costs, member, int(cost))
    redis.call('PEXPIRE', s.window, 61000)
    redis.call('PEXPIRE', s.costs, 61000)
  end
  redis.call('HSET', s.usage, 'uses', int(s.uses + 1), 'last', int(math.max(s.last, now)), 'tokens', int(s.tokens))
end
return token
";

/// KEYS: usage, window and costs of each scope the grant counted in: the
/// resource's, then its context's when it had one. ARGV: `permit:token`,
/// tokens used. The grant counts its use from now on in each scope whose
/// window still holds it; nothing in one it left.
const RECONCILE: &str = "
for k = 1, #KEYS, 3 do
  if redis.call('ZSCORE', KEYS[k + 1], ARGV[1]) then
    local before = tonumber(redis.call('HGET', KEYS[k + 2], ARGV[1]) or '0')
    redis.call('HSET', KEYS[k + 2], ARGV[1], ARGV[2])
    redis.call('HINCRBY', KEYS[k], 'tokens', int(tonumber(ARGV[2]) - before))
  end
end
return 0
";

/// KEYS: fence, lease. ARGV: token, ttl µs. The current token extends; a
/// newer one (a lease restored from a checkpoint) is adopted while the
/// permit is free.
const EXTEND: &str = "
local token = tonumber(ARGV[1])
local fence = tonumber(redis.call('GET', KEYS[1]) or '0')
local free = true
local held = redis.call('GET', KEYS[2])
if held then
  local sep = string.find(held, ':', 1, true)
  free = tonumber(string.sub(held, sep + 1)) <= now
end
if token == fence or (token > fence and free) then
  redis.call('SET', KEYS[1], int(token))
  redis.call('SET', KEYS[2], int(token) .. ':' .. int(now + tonumber(ARGV[2])))
  return 1
end
return 0
";

/// KEYS: lease. ARGV: token.
const REVOKE: &str = "
local held = redis.call('GET', KEYS[1])
if held and string.sub(held, 1, string.find(held, ':', 1, true) - 1) == ARGV[1] then
  redis.call('DEL', KEYS[1])
end
return 0
";

/// KEYS: rate. ARGV: emission interval µs, tolerance µs (burst × interval).
/// Returns 0 when admitted, else µs until it would be.
const ADMIT: &str = "
local tat = math.max(tonumber(redis.call('GET', KEYS[1]) or '0'), now)
local next = tat + tonumber(ARGV[1])
local over = next - now - tonumber(ARGV[2])
if over > 0 then return over end
redis.call('SET', KEYS[1], int(next))
return 0
";

/// KEYS: epoch, seq, log. ARGV: entry, writer epoch, lowest position allowed.
/// Returns {1, seq} or {0, stored epoch}.
const APPEND: &str = "
if ARGV[2] ~= '0' then
  local stored = redis.call('GET', KEYS[1]) or '0'
  if stored ~= ARGV[2] then return {0, tonumber(stored)} end
end
local seq = redis.call('INCR', KEYS[2])
if seq < tonumber(ARGV[3]) then
  seq = tonumber(ARGV[3])
  redis.call('SET', KEYS[2], int(seq))
end
redis.call('XADD', KEYS[3], '0-' .. int(seq), 'e', ARGV[1])
return {1, seq}
";

/// KEYS: epoch, checkpoint, log. ARGV: writer epoch, expected version, log position, bytes.
/// An owner (epoch > 0) saves on its version and prunes what it folded; in
/// shared mode a checkpoint that folded at least as much of the log as the
/// stored one replaces it. Returns {status, version or epoch}.
const SAVE: &str = "
local mine = tonumber(ARGV[1])
if mine ~= 0 then
  local stored = tonumber(redis.call('GET', KEYS[1]) or '0')
  if stored ~= mine then return {'stale_epoch', stored} end
end
local cur = redis.call('HMGET', KEYS[2], 'version', 'log_seq')
local version = tonumber(cur[1] or '0')
local folded = tonumber(cur[2] or '0')
if (mine ~= 0 and version ~= tonumber(ARGV[2])) or (mine == 0 and folded > tonumber(ARGV[3])) then
  return {'conflict', version}
end
redis.call('HSET', KEYS[2], 'epoch', ARGV[1], 'version', int(version + 1), 'log_seq', ARGV[3], 'bytes', ARGV[4])
if mine ~= 0 then redis.call('XTRIM', KEYS[3], 'MINID', '0-' .. int(tonumber(ARGV[3]) + 1)) end
return {'ok', version + 1}
";

/// KEYS: epoch. ARGV: epoch. Raises the stored epoch, never lowers it.
const RAISE_EPOCH: &str = "
if tonumber(ARGV[1]) > tonumber(redis.call('GET', KEYS[1]) or '0') then redis.call('SET', KEYS[1], ARGV[1]) end
return 0
";

/// The scripts, hashed once; each runs by EVALSHA (loaded on first use).
struct Scripts {
    grant: Script,
    reconcile: Script,
    extend: Script,
    revoke: Script,
    admit: Script,
    append: Script,
    save: Script,
    raise_epoch: Script,
}

impl Scripts {
    fn new() -> Scripts {
        let timed = |body: &str| Script::new(&format!("{PRELUDE}{NOW}{body}"));
        let plain = |body: &str| Script::new(&format!("{PRELUDE}{body}"));
        Scripts {
            grant: timed(GRANT),
            reconcile: plain(RECONCILE),
            extend: timed(EXTEND),
            revoke: plain(REVOKE),
            admit: timed(ADMIT),
            append: plain(APPEND),
            save: plain(SAVE),
            raise_epoch: plain(RAISE_EPOCH),
        }
    }
}

/// A Redis server that tenants live in.
#[derive(Clone)]
pub struct Redis {
    client: Client,
}

opaque_debug!(Redis, RedisStorage, RedisFencing);

impl Backend for Redis {
    fn open(url: &str) -> crate::Result<Redis> {
        Ok(Redis::connect(url)?)
    }

    fn is_shared(&self) -> bool {
        true
    }

    fn tenant_providers(&self, tenant: &str, epoch: u64, clock: Arc<dyn Clock>) -> crate::Result<Providers> {
        Ok(Providers::redis(self, tenant, epoch, clock))
    }

    /// Makes `epoch` the tenant's if it is higher than the stored one, so an
    /// owner chosen elsewhere fences this store's earlier writers.
    fn raise_epoch(&self, tenant: &str, epoch: u64) -> Result<(), StoreError> {
        let keys = Keys::new(tenant);
        self.link().run(|c, s| s.raise_epoch.key(&keys.epoch).arg(epoch).invoke::<i64>(c))?;
        Ok(())
    }

    /// For a caller that owns the connection (see [`Exchange`]); none for
    /// a TLS server.
    fn wire(&self, tenant: &str, epoch: u64) -> Option<RedisWire> {
        RedisWire::new(self.client.get_connection_info(), Keys::new(tenant), epoch)
    }
}

impl Redis {
    /// Checks `url` (`redis://host:port[/db]`) and that the server answers.
    pub fn connect(url: &str) -> Result<Redis, StoreError> {
        let client = Client::open(url).map_err(|e| unavailable(format!("store url: {e}")))?;
        let db = Redis { client };
        db.link().run(|c, _| redis::cmd("PING").query::<String>(c))?;
        Ok(db)
    }

    fn link(&self) -> Link {
        Link { client: self.client.clone(), conn: None, scripts: Scripts::new() }
    }

    /// The tenant's storage and lease authority, writing under `epoch` (0:
    /// shared mode).
    pub fn tenant(&self, tenant: &str, epoch: u64) -> (RedisStorage, RedisFencing) {
        let keys = Keys::new(tenant);
        (
            RedisStorage { link: self.link(), keys: keys.clone(), epoch, seen: 0 },
            RedisFencing { link: self.link(), keys, epoch },
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
            unavailable(e)
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
        let (ok, value): (u64, u64) = self.link.run(|c, s| {
            s.append.key(&keys.epoch).key(&keys.seq).key(&keys.log).arg(entry).arg(epoch).arg(floor).invoke(c)
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

/// The grant script's reply (see `GRANT`).
pub(super) fn grant_answer(reply: Option<i64>) -> GrantAnswer {
    match reply {
        Some(token) if token > 0 => GrantAnswer::Granted(token as u64),
        Some(0) => GrantAnswer::Limited(None),
        Some(wait) => {
            let (wait_ns, context) = ((wait.unsigned_abs() / 2).saturating_mul(1_000), wait % 2 != 0);
            if context {
                GrantAnswer::ContextLimited(wait_ns)
            } else {
                GrantAnswer::Limited(Some(wait_ns))
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
    ) -> Result<GrantAnswer, StoreError> {
        let (fence, lease) = self.keys.permit(permit);
        let usage = self.keys.usage(permit, None);
        let context = context_args(claim).map(|(name, args)| (self.keys.usage(permit, Some(name)), args));
        let (epoch_key, epoch) = (&self.keys.epoch, self.epoch);
        let reply: Option<i64> = self.link.run(|c, s| {
            let mut call = s.grant.key(epoch_key);
            call.key(&fence).key(&lease).key(&usage[..]);
            if let Some((keys, _)) = &context {
                call.key(&keys[..]);
            }
            call.arg(micros(ttl)).arg(last).arg(epoch).arg(&claim_args(claim)[..]).arg(permit.index);
            if let Some((_, args)) = &context {
                call.arg(&args[..]);
            }
            call.invoke(c)
        })?;
        Ok(grant_answer(reply))
    }

    fn reconcile(
        &mut self,
        permit: Permit<'_>,
        context: Option<&str>,
        token: u64,
        _reserved: u64,
        used: u64,
    ) -> Result<(), StoreError> {
        let usage = self.keys.usage(permit, None);
        let context = context.map(|context| self.keys.usage(permit, Some(context)));
        let member = format!("{}:{token}", permit.index);
        self.link.run(|c, s| {
            let mut call = s.reconcile.key(&usage[..]);
            if let Some(context) = &context {
                call.key(&context[..]);
            }
            call.arg(member).arg(used).invoke::<i64>(c)
        })?;
        Ok(())
    }

    fn extend(&mut self, permit: Permit<'_>, token: u64, ttl: u64, _now: u64) -> Result<bool, StoreError> {
        if token == 0 {
            return Ok(false);
        }
        let (fence, lease) = self.keys.permit(permit);
        let extended: i64 =
            self.link.run(|c, s| s.extend.key(&fence).key(&lease).arg(token).arg(micros(ttl)).invoke(c))?;
        Ok(extended == 1)
    }

    fn revoke(&mut self, permit: Permit<'_>, token: u64) -> Result<(), StoreError> {
        let (_, lease) = self.keys.permit(permit);
        self.link.run(|c, s| s.revoke.key(&lease).arg(token).invoke::<i64>(c))?;
        Ok(())
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
