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

/// Defines `generation(key, ttl, lost)`, which every script that grants
/// or extends runs first: the store's history as this server tells it. The
/// generation record (a hash at `key`: `run`, `floor`, `resume` µs, `ttl`
/// µs) names the server process (`run_id`: 40 hex digits, found by a plain
/// search, half the cost of a pattern match) that last granted. Another
/// one means the data was carried over by a promotion or a restart, either
/// of which can lose the last writes (an asynchronous replica, `appendfsync
/// everysec`); so does a missing record when the store lost what it had
/// (`lost()`, asked only then: the log is behind what the pool folded).
/// Then leases and tokens granted before may be forgotten: no permit is
/// granted until the longest lease TTL the record knows has passed
/// (`resume`), and tokens start at `floor`, the server's clock in µs, above
/// every token a clock that was behind it can have issued (one grant per
/// µs at most). A missing record is otherwise a new tenant's, started at no
/// floor; without `lost` the caller cannot tell, and nothing is started.
/// Returns the floor and the µs left to wait.
pub(super) const GENERATION: &str = "local function generation(key, ttl, lost)
  local info = redis.call('INFO', 'server')
  local at = string.find(info, 'run_id:', 1, true)
  local run = string.sub(info, at + 7, at + 46)
  local g = redis.call('HMGET', key, 'run', 'floor', 'resume', 'ttl')
  local floor, resume, kept = tonumber(g[2] or '0'), tonumber(g[3] or '0'), tonumber(g[4] or '0')
  local longest = math.max(kept, ttl)
  if g[1] == run then
    if longest > kept then redis.call('HSET', key, 'ttl', int(longest)) end
  elseif g[1] or (lost and lost()) then
    floor, resume = math.max(now, floor + 1), now + longest
    redis.call('HSET', key, 'run', run, 'floor', int(floor), 'resume', int(resume), 'ttl', int(longest))
  elseif lost then
    redis.call('HSET', key, 'run', run, 'floor', '0', 'resume', '0', 'ttl', int(longest))
  end
  return floor, math.max(resume - now, 0)
end
";

/// KEYS: epoch, fence, lease, then the usage of the resource's own scope
/// and of the claim's context's (the resource's keys again without a
/// context; see `Keys::usage`): a scope's usage is three keys, usage (a
/// hash: `uses`, `last` µs, `tokens` of the window), window (a sorted set
/// of `permit:token` by grant time, µs) and costs (a hash `permit:token` →
/// the tokens that grant counts); then the resource's day, the permit's
/// claimed grant (a hash: `token`, `at` µs, `day` 1 when the resource's
/// day counted it, `windows` the group windows that did, separated by RS),
/// and four keys per group of the claim: its usage (a hash:
/// `uses`, `last`), minute, day, and leases (a hash: the lease key of each
/// permit granted with it → that grant's token). A bucketed window (a day,
/// a group's minute) is a list of entries `first:at:grants:tokens`, oldest
/// first, as the core's `Buckets` keeps them (µs).
///
/// ARGV: ttl µs, last token seen by the pool, writer epoch, then the claim
/// (0 for a limit not set, all 0 without a claim): `1` when the resource's
/// own limits count the grant, its rpm, tpm, min_interval µs (rounded up),
/// max_uses, and the cost; the permit's index; `1` when the claim names a
/// context, and the context's rpm, tpm and min_interval µs (rounded up);
/// the resource's rpd and tpd; the number of groups, then each group's rpm,
/// tpm, min_interval µs (rounded up), rpd, tpd and concurrency.
///
/// The scopes are judged in order, the resource's, the context's, then the
/// groups' (see `providers::usage`); all must admit the grant, which is
/// then counted in each. Returns the token; nil when the permit is held
/// (or the epoch is stale, or the cost can never fit a tpm or tpd: nothing
/// counted); 0 when max_uses are spent; a wait as a negative number,
/// `-(16 µs + code)`: code 0 the resource's limits, 1 the context's, `2 + i`
/// the claim's group `i`; -1 when the grant's view is stale (the last KEY,
/// `changed`, holds a log position above the last ARGV, the view: nothing
/// is read or written then); the error `RECOVERING <µs>` while the store's
/// generation (the KEY before `changed`, see `GENERATION`; the one before
/// it, the log's `seq`, says whether the store lost log entries the view
/// folded) waits out the leases an earlier history may have granted. A
/// token is above the generation's floor. A group's concurrency counts the leases of its
/// leases hash whose lease key still holds that token unexpired, dropping
/// the others. Those lease keys are read by the names the hash holds, not
/// declared in KEYS: which permits hold a group's leases is only known on
/// the server, and reading them here keeps the grant one script (and
/// revoke and extend unaware of groups). They are the tenant's keys, in
/// its hash slot, so a cluster serves them from the script's node.
/// A group whose concurrency is full keeps a line of the pools it refused
/// (the leases key's name, then `:line`: a sorted set of pool names by
/// when each joined, and `:alive`: a hash of until when each stays in it,
/// refreshed by each of its attempts): a pool is admitted only while the
/// live leases and the pools ahead of it in line leave a slot, leaves the
/// line when granted, and joins it again at its end when refused; a pool
/// not asking for 250 ms is dropped from it. Such a refusal waits 20 ms
/// at most (a pool asks again within its place's 250 ms; a release wakes it
/// sooner), not until the soonest lease expires. The waiting hash (the
/// fourth KEY from the end) names every pool in a line, for the revoke's
/// wake-ups; the pool's name is the ARGV before the view.
/// A scope's window and costs expire a minute after its newest grant, a
/// bucketed window a span after it, when every grant in them has left
/// anyway. Pruning writes the scope's `tokens` back at once, refused or
/// not: the pruned costs are gone, and a count still holding them would
/// refuse the scope until its window expired.
pub(super) const GRANT: &str = "
if tonumber(redis.call('GET', KEYS[#KEYS]) or '0') > tonumber(ARGV[#ARGV]) then return -1 end
local me, waiting, GRACE, POLL = ARGV[#ARGV - 1], KEYS[#KEYS - 3], 250000, 20000
if ARGV[3] ~= '0' and redis.call('GET', KEYS[1]) ~= ARGV[3] then return false end
local function lost() return tonumber(redis.call('GET', KEYS[#KEYS - 2]) or '0') < tonumber(ARGV[#ARGV]) end
local floor, recovering = generation(KEYS[#KEYS - 1], tonumber(ARGV[1]), lost)
if recovering > 0 then return redis.error_reply('RECOVERING ' .. int(recovering)) end
local held = redis.call('GET', KEYS[3])
if held then
  local sep = string.find(held, ':', 1, true)
  if tonumber(string.sub(held, sep + 1)) > now then return false end
end
local MINUTE, DAY = 60000000, 86400000000
local cost = tonumber(ARGV[9])
local function scope(k, rpm, tpm, gap, max_uses, context)
  return {usage = KEYS[k], window = KEYS[k + 1], costs = KEYS[k + 2], rpm = tonumber(rpm), tpm = tonumber(tpm),
    gap = tonumber(gap), max_uses = tonumber(max_uses), context = context, uses = 0, last = -1, tokens = 0}
end
local scopes = {}
if ARGV[4] == '1' then
  local s = scope(4, ARGV[5], ARGV[6], ARGV[7], ARGV[8], false)
  s.day = {key = KEYS[10], rate = tonumber(ARGV[15]), tokens = tonumber(ARGV[16]), span = DAY}
  table.insert(scopes, s)
end
if ARGV[11] == '1' then table.insert(scopes, scope(7, ARGV[12], ARGV[13], ARGV[14], '0', true)) end
local groups = {}
for i = 1, tonumber(ARGV[17]) do
  local k, a = 12 + 4 * (i - 1), 18 + 6 * (i - 1)
  table.insert(groups, {usage = KEYS[k], leases = KEYS[k + 3], gap = tonumber(ARGV[a + 2]),
    concurrency = tonumber(ARGV[a + 5]), uses = 0, last = -1,
    minute = {key = KEYS[k + 1], rate = tonumber(ARGV[a]), tokens = tonumber(ARGV[a + 1]), span = MINUTE},
    day = {key = KEYS[k + 2], rate = tonumber(ARGV[a + 3]), tokens = tonumber(ARGV[a + 4]), span = DAY}})
end
-- A bucketed window w (limits rate and tokens, 0 for none) read and pruned
-- of the entries that left it by now; nil without limits.
local function entries(w)
  if w.rate == 0 and w.tokens == 0 then return nil end
  local raw = redis.call('LRANGE', w.key, 0, -1)
  local kept, gone = {}, 0
  for _, e in ipairs(raw) do
    local f, a, g, t = string.match(e, '^(%d+):(%d+):(%d+):(%d+)$')
    a = tonumber(a)
    if #kept == 0 and a + w.span <= now then
      gone = gone + 1
    else
      table.insert(kept, {first = tonumber(f), at = a, grants = tonumber(g), tokens = tonumber(t)})
    end
  end
  if gone > 0 then redis.call('LTRIM', w.key, gone, -1) end
  w.entries = kept
  return kept
end
-- When the oldest entries holding `needed` of field `of` leave w.
local function freed(w, needed, of)
  local sum = 0
  for _, e in ipairs(w.entries) do
    sum = sum + e[of]
    if sum >= needed then return e.at + w.span end
  end
  return math.huge
end
-- The earliest instant w admits the grant: 0 when now, 'held' never.
local function free_in(w)
  if not entries(w) then return 0 end
  local grants, tokens = 0, 0
  for _, e in ipairs(w.entries) do grants, tokens = grants + e.grants, tokens + e.tokens end
  local free = 0
  if w.rate > 0 and grants + 1 > w.rate then free = math.max(free, freed(w, grants + 1 - w.rate, 'grants')) end
  if w.tokens > 0 then
    if cost > w.tokens then return 'held' end
    if tokens + cost > w.tokens then free = math.max(free, freed(w, tokens + cost - w.tokens, 'tokens')) end
  end
  return free
end
-- Counts the grant in w, as `Buckets::record`.
local function record(w)
  if not w.entries then return end
  local e = w.entries[#w.entries]
  if e and now - e.first < w.span / 1024 then
    e.at, e.grants, e.tokens = math.max(e.at, now), e.grants + 1, e.tokens + cost
    redis.call('LSET', w.key, -1, int(e.first) .. ':' .. int(e.at) .. ':' .. int(e.grants) .. ':' .. int(e.tokens))
  else
    redis.call('RPUSH', w.key, int(now) .. ':' .. int(now) .. ':1:' .. int(cost))
  end
  redis.call('PEXPIRE', w.key, math.floor(w.span / 1000) + 1000)
end
-- Prunes scope s and judges the grant there: nil when it admits it, else
-- 'spent', 'held' or the µs until it may.
local function judge(s)
  local u = redis.call('HMGET', s.usage, 'uses', 'last', 'tokens')
  s.uses, s.last = tonumber(u[1] or '0'), tonumber(u[2] or '-1')
  if s.max_uses > 0 and s.uses >= s.max_uses then return 'spent' end
  if s.tpm > 0 and cost > s.tpm then return 'held' end
  if redis.call('EXISTS', s.window) == 1 then s.tokens = tonumber(u[3] or '0') end
  local cutoff = int(now - MINUTE)
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
    free = math.max(free, tonumber(leaves[2]) + MINUTE)
  end
  if s.tpm > 0 and s.tokens + cost > s.tpm then
    local needed, sum = s.tokens + cost - s.tpm, 0
    local oldest = redis.call('ZRANGE', s.window, 0, -1, 'WITHSCORES')
    for i = 1, #oldest, 2 do
      sum = sum + tonumber(redis.call('HGET', s.costs, oldest[i]) or '0')
      if sum >= needed then
        free = math.max(free, tonumber(oldest[i + 1]) + MINUTE)
        break
      end
    end
  end
  if s.day then
    local day = free_in(s.day)
    if day == 'held' then return 'held' end
    free = math.max(free, day)
  end
  if free > now then return free - now end
  return nil
end
-- Judges the grant in group g: nil when it admits it, else 'held' or the
-- µs until it may.
local function judge_group(g)
  local u = redis.call('HMGET', g.usage, 'uses', 'last')
  g.uses, g.last = tonumber(u[1] or '0'), tonumber(u[2] or '-1')
  local free = now
  if g.gap > 0 and g.last >= 0 then free = math.max(free, g.last + g.gap) end
  for _, w in ipairs({g.minute, g.day}) do
    local at = free_in(w)
    if at == 'held' then return 'held' end
    free = math.max(free, at)
  end
  if free > now then return free - now end
  if g.concurrency > 0 then
    local leases = redis.call('HGETALL', g.leases)
    local live, soonest = 0, math.huge
    for i = 1, #leases, 2 do
      local lease = redis.call('GET', leases[i])
      local ends = nil
      if lease then
        local sep = string.find(lease, ':', 1, true)
        if string.sub(lease, 1, sep - 1) == leases[i + 1] then ends = tonumber(string.sub(lease, sep + 1)) end
      end
      if ends and ends > now then
        live, soonest = live + 1, math.min(soonest, ends)
      else
        redis.call('HDEL', g.leases, leases[i])
      end
    end
    local line, alive = g.leases .. ':line', g.leases .. ':alive'
    local ahead, queued = 0, redis.call('ZRANGE', line, 0, -1)
    if #queued > 0 then
      local untils, mine = redis.call('HMGET', alive, unpack(queued)), false
      for i, pool in ipairs(queued) do
        if tonumber(untils[i] or '0') <= now then
          redis.call('ZREM', line, pool)
          redis.call('HDEL', alive, pool)
        elseif pool == me then
          mine = true
        elseif not mine then
          ahead = ahead + 1
        end
      end
    end
    if live + ahead >= g.concurrency then
      redis.call('ZADD', line, 'NX', int(now), me)
      redis.call('HSET', alive, me, int(now + GRACE))
      redis.call('HSET', waiting, me, int(now + GRACE))
      for _, key in ipairs({line, alive, waiting}) do redis.call('PEXPIRE', key, 1000) end
      return math.max(math.min(soonest - now, POLL), 1)
    end
  end
  return nil
end
for _, s in ipairs(scopes) do
  local refused = judge(s)
  if refused == 'spent' then return 0 end
  if refused == 'held' then return false end
  if refused then
    if s.context then return -(16 * refused + 1) end
    return -16 * refused
  end
end
for i, g in ipairs(groups) do
  local refused = judge_group(g)
  if refused == 'held' then return false end
  if refused then return -(16 * refused + 1 + i) end
end
local token = math.max(tonumber(redis.call('GET', KEYS[2]) or '0'), tonumber(ARGV[2]), floor) + 1
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
  if s.day then record(s.day) end
  redis.call('HSET', s.usage, 'uses', int(s.uses + 1), 'last', int(math.max(s.last, now)), 'tokens', int(s.tokens))
end
local windows = {}
for _, g in ipairs(groups) do
  if g.minute.entries or g.day.entries then
    for _, w in ipairs({g.minute, g.day}) do
      if w.entries then
        record(w)
        table.insert(windows, w.key)
      end
    end
    redis.call('HSET', g.usage, 'uses', int(g.uses + 1), 'last', int(math.max(g.last, now)))
  end
  if g.concurrency > 0 then
    redis.call('HSET', g.leases, KEYS[3], int(token))
    if redis.call('ZREM', g.leases .. ':line', me) == 1 then
      redis.call('HDEL', g.leases .. ':alive', me)
      redis.call('HDEL', waiting, me)
    end
  end
end
if ARGV[4] == '1' or #groups > 0 then
  local day = 0
  if #scopes > 0 and scopes[1].day and scopes[1].day.entries then day = 1 end
  redis.call('HSET', KEYS[11], 'token', int(token), 'at', int(now), 'day', day,
    'windows', table.concat(windows, string.char(30)))
end
return token
";

/// KEYS: the permit's claimed grant, the resource's day, usage, window and
/// costs of each scope the grant counted in (the resource's, then its
/// context's when it had one), then the bucketed windows of its groups the
/// claimed grant lists (read by the caller: a claimed grant's list never
/// changes while its token stays). ARGV: `permit:token`, tokens used,
/// tokens reserved, the token, the number of scopes (1 or 2). The grant
/// counts its use from now on in each minute window that still holds it;
/// in a bucketed one, the entry holding it counts `used` for `reserved`
/// while the permit's claimed grant is still this token's; nothing in a
/// window it left.
const RECONCILE: &str = "
local function settle(key, at)
  local raw = redis.call('LRANGE', key, 0, -1)
  for i, e in ipairs(raw) do
    local f, a, g, t = string.match(e, '^(%d+):(%d+):(%d+):(%d+)$')
    if tonumber(a) >= at then
      if tonumber(f) <= at then
        local kept = math.max(tonumber(t) - tonumber(ARGV[3]), 0) + tonumber(ARGV[2])
        redis.call('LSET', key, i - 1, f .. ':' .. a .. ':' .. g .. ':' .. int(kept))
      end
      return
    end
  end
end
local windows = 3 + 3 * tonumber(ARGV[5])
local claimed = redis.call('HMGET', KEYS[1], 'token', 'at', 'day')
if claimed[1] == ARGV[4] then
  local at = tonumber(claimed[2])
  if claimed[3] == '1' then settle(KEYS[2], at) end
  for k = windows, #KEYS do settle(KEYS[k], at) end
end
for k = 3, windows - 1, 3 do
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

/// KEYS: minute, day and leases of each group asked about (see `GRANT`).
/// Returns, per group, the grants and tokens its minute and its day hold
/// at the server's now (the entries `GRANT` would keep: from the oldest
/// whose newest grant has not left the window), then how many of its
/// leases still hold their permit unexpired: read, not pruned.
const GROUPS: &str = "
local out = {}
local function held(key, span)
  local grants, tokens, kept = 0, 0, false
  for _, e in ipairs(redis.call('LRANGE', key, 0, -1)) do
    local a, g, t = string.match(e, '^%d+:(%d+):(%d+):(%d+)$')
    kept = kept or tonumber(a) + span > now
    if kept then grants, tokens = grants + tonumber(g), tokens + tonumber(t) end
  end
  table.insert(out, grants)
  table.insert(out, tokens)
end
for k = 1, #KEYS, 3 do
  held(KEYS[k], 60000000)
  held(KEYS[k + 1], 86400000000)
  local leases = redis.call('HGETALL', KEYS[k + 2])
  local live = 0
  for i = 1, #leases, 2 do
    local lease = redis.call('GET', leases[i])
    if lease then
      local sep = string.find(lease, ':', 1, true)
      if string.sub(lease, 1, sep - 1) == leases[i + 1] and tonumber(string.sub(lease, sep + 1)) > now then
        live = live + 1
      end
    end
  end
  table.insert(out, live)
end
return out
";

/// KEYS: fence, lease, generation. ARGV: token, ttl µs. The current token
/// extends; a newer one (a lease restored from a checkpoint) is adopted
/// while the permit is free; one below the generation's floor was granted
/// in a history the store may have lost, and never extends.
const EXTEND: &str = "
local token = tonumber(ARGV[1])
if token <= generation(KEYS[3], tonumber(ARGV[2]), nil) then return 0 end
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

/// KEYS: lease, waiting (see `GRANT`). ARGV: token, the prefix of a
/// pool's wake-up list, the releasing pool's name. A release tells every
/// other pool waiting in a group's line (a list of one element: a pool
/// woken twice tries once), and forgets those whose wait lapsed.
pub(super) const REVOKE: &str = "
local held = redis.call('GET', KEYS[1])
if held and string.sub(held, 1, string.find(held, ':', 1, true) - 1) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  local waiting = redis.call('HGETALL', KEYS[2])
  if #waiting > 0 then
    local t = redis.call('TIME')
    local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
    for i = 1, #waiting, 2 do
      if tonumber(waiting[i + 1]) <= now then
        redis.call('HDEL', KEYS[2], waiting[i])
      elseif waiting[i] ~= ARGV[3] then
        local wake = ARGV[2] .. waiting[i]
        redis.call('LPUSH', wake, '1')
        redis.call('LTRIM', wake, 0, 0)
        redis.call('PEXPIRE', wake, 1000)
      end
    end
  end
end
return 0
";

/// KEYS: the lease of each permit asked about. Returns how many hold an
/// unexpired lease on the server's clock.
const LIVE: &str = "
local live = 0
for _, key in ipairs(KEYS) do
  local held = redis.call('GET', key)
  if held and tonumber(string.sub(held, string.find(held, ':', 1, true) + 1)) > now then live = live + 1 end
end
return live
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

/// KEYS: epoch, seq, log, changed. ARGV: entry, writer epoch, lowest
/// position allowed, `1` when the entry changes what grants are judged
/// against (its position is then written to `changed`).
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
if ARGV[4] == '1' then redis.call('SET', KEYS[4], int(seq)) end
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
    pub(super) groups: Script,
    pub(super) extend: Script,
    pub(super) revoke: Script,
    pub(super) live: Script,
    pub(super) admit: Script,
    pub(super) append: Script,
    pub(super) save: Script,
    pub(super) raise_epoch: Script,
}

impl Scripts {
    pub(super) fn new() -> Scripts {
        let timed = |body: &str| Script::new(&format!("{PRELUDE}{NOW}{body}"));
        let plain = |body: &str| Script::new(&format!("{PRELUDE}{body}"));
        let generational = |body: &str| Script::new(&format!("{PRELUDE}{NOW}{GENERATION}{body}"));
        Scripts {
            grant: generational(GRANT),
            reconcile: plain(RECONCILE),
            window: timed(WINDOW),
            groups: timed(GROUPS),
            extend: generational(EXTEND),
            revoke: plain(REVOKE),
            live: timed(LIVE),
            admit: timed(ADMIT),
            append: plain(APPEND),
            save: plain(SAVE),
            raise_epoch: plain(RAISE_EPOCH),
        }
    }
}
