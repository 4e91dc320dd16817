//! The Lua scripts that make every decision on the server, atomically and
//! on its own clock, and their hashes (each runs by EVALSHA).

use redis::Script;

/// At the top of every script: integers written without an exponent
/// (Lua's default number format switches to one above 1e14).
pub(super) const PRELUDE: &str = "local function int(x) return string.format('%d', x) end
";

/// The server's clock in microseconds, for the scripts that judge time.
pub(super) const NOW: &str = "local t = redis.call('TIME')
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
pub(super) const GRANT: &str = "
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

/// KEYS: window and costs of each resource's own scope, in pairs. Returns
/// the grants and tokens each window holds at the server's now: those
/// `GRANT` would keep (made after its cutoff), read, not pruned.
const WINDOW: &str = "
local cutoff = int(now - 60000000)
local out = {}
for k = 1, #KEYS, 2 do
  local kept = redis.call('ZRANGEBYSCORE', KEYS[k], '(' .. cutoff, '+inf')
  local tokens = 0
  for i = 1, #kept, 1000 do
    local chunk = {unpack(kept, i, math.min(i + 999, #kept))}
    for _, c in ipairs(redis.call('HMGET', KEYS[k + 1], unpack(chunk))) do tokens = tokens + tonumber(c or '0') end
  end
  table.insert(out, #kept)
  table.insert(out, tokens)
end
return out
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
pub(super) const REVOKE: &str = "
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
pub(super) struct Scripts {
    pub(super) grant: Script,
    pub(super) reconcile: Script,
    pub(super) window: Script,
    pub(super) extend: Script,
    pub(super) revoke: Script,
    pub(super) admit: Script,
    pub(super) append: Script,
    pub(super) save: Script,
    pub(super) raise_epoch: Script,
}

impl Scripts {
    pub(super) fn new() -> Scripts {
        let timed = |body: &str| Script::new(&format!("{PRELUDE}{NOW}{body}"));
        let plain = |body: &str| Script::new(&format!("{PRELUDE}{body}"));
        Scripts {
            grant: timed(GRANT),
            reconcile: plain(RECONCILE),
            window: timed(WINDOW),
            extend: timed(EXTEND),
            revoke: plain(REVOKE),
            admit: timed(ADMIT),
            append: plain(APPEND),
            save: plain(SAVE),
            raise_epoch: plain(RAISE_EPOCH),
        }
    }
}
