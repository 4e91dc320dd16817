// The default path: recovery without a probe loop, the provider's answers
// (429 + Retry-After, quotas, dead keys), explained refusals, fail-open and
// cooling rules, as a JavaScript user meets them.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { Pool, ManualClock, NoResourceAvailableError, InvalidInputError } from 'repute';

function keys(options = {}) {
  const clock = new ManualClock();
  const pool = new Pool({ clock, strategy: 'first', ...options });
  pool.register('api-key', 'k1');
  return { clock, pool };
}

async function refused(pool, context) {
  const e = await pool.acquire(context, { timeoutMs: 0 }).then(
    () => assert.fail('expected a refusal'),
    (e) => e,
  );
  assert.ok(e instanceof NoResourceAvailableError, String(e));
  return e;
}

test('a timed-out key gets one early trial, then comes back through one trial lease, no probe loop needed', async () => {
  const { clock, pool } = keys();
  for (let i = 0; i < 3; i++) await pool.reportFailure('api-key', 'k1', 'gpt', 'timeout', { latencyMs: 1000 });
  // Nothing else to choose: one early trial of the transient cooldown.
  const early = pool.tryAcquire('gpt');
  assert.equal(early.leaseKind, 'trial');
  assert.equal(pool.tryAcquire('gpt'), null, 'one trial at a time');
  await early.reportFailure('timeout', { latencyMs: 1000 });
  await early.release();
  // It failed: the next exponent (480 s), and the next early trial a base
  // cooldown (60 s) after this one; nothing else can come sooner.
  const e = await refused(pool, 'gpt');
  assert.deepEqual([e.cooling, e.retryAfterMs, e.settled], [1, 60_000, true]);
  clock.advance(480_000);
  assert.deepEqual(pool.dueForProbe(), []);
  const trial = pool.tryAcquire('gpt');
  assert.equal(trial.leaseKind, 'trial');
  assert.equal(pool.tryAcquire('gpt'), null, 'one trial at a time');
  await trial.reportSuccess({ latencyMs: 200 });
  await trial.release();
  assert.equal(pool.cells('api-key', 'k1')[1].state, 'recovering');
  assert.equal(pool.tryAcquire('gpt').leaseKind, 'client');
});

test('a wait the pool knows cannot end in time is refused at once', async () => {
  // The pool clock never moves here: an acquire that did not give up at
  // once would wait for ever.
  const clock = new ManualClock();
  const pool = new Pool({ clock, strategy: 'first' });
  pool.register('proxy', 'a');
  const lease = pool.tryAcquire('shop');
  await lease.reportHttp(403, { latencyMs: 50 });
  await lease.release();
  // A site's ban: 300 s, tried early after 10 s; nothing else can free it.
  // A trial mostly finds the ban still on: a deadline before the ban's end
  // gives up at once, even one the trial comes within.
  for (const timeoutMs of [5_000, 60_000]) {
    const e = await pool.acquire('shop', { timeoutMs }).then(() => assert.fail('expected a refusal'), (e) => e);
    assert.ok(e instanceof NoResourceAvailableError, String(e));
    assert.deepEqual([e.cooling, e.retryAfterMs, e.expectedAfterMs, e.settled], [1, 10_000, 300_000, true]);
  }
  // A deadline past the ban's end waits, and takes the early trial.
  const waiting = pool.acquire('shop', { timeoutMs: 400_000 });
  clock.advance(10_000);
  const trial = await waiting;
  assert.equal(trial.leaseKind, 'trial');
  await trial.release();
});

test('429 with Retry-After pauses only that cell for exactly that long', async () => {
  const { clock, pool } = keys();
  const lease = pool.tryAcquire('gpt');
  await lease.reportHttp(429, { latencyMs: 50, headers: new Headers({ 'Retry-After': '12' }) });
  await lease.release();
  const cell = pool.cells('api-key', 'k1')[1];
  assert.deepEqual([cell.state, cell.cause, cell.coolingUntilMs, cell.consecutiveFailures], ['cooling', 'rate_limited', 12_000, 0]);
  const other = pool.tryAcquire('claude');
  assert.ok(other, 'another model is not paused');
  await other.release();
  clock.advance(11_900);
  const e = await refused(pool, 'gpt');
  assert.deepEqual([e.rateLimited, e.retryAfterMs], [1, 100]);
  clock.advance(100);
  assert.equal(pool.tryAcquire('gpt').leaseKind, 'client');
});

test('headers may be a plain object, a Map or pairs; statuses map as documented', async () => {
  const { pool } = keys();
  await pool.reportHttp('api-key', 'k1', 'gpt', 429, { headers: [['retry-after', '5']] });
  assert.equal(pool.cells('api-key', 'k1')[1].coolingUntilMs, 5_000);
  await pool.reportHttp('api-key', 'k1', 'gpt', 429, { headers: new Map([['Retry-After', '9']]) });
  assert.equal(pool.cells('api-key', 'k1')[1].coolingUntilMs, 9_000);
  await pool.reportHttp('api-key', 'k1', 'gpt', 200, { headers: { 'content-type': 'text/plain' } });
  await pool.reportHttp('api-key', 'k1', 'gpt', 404);
  assert.equal(pool.cells('api-key', 'k1')[1].score, -2 + 5 + 5);
  await assert.rejects(pool.reportHttp('api-key', 'k1', 'gpt', 99), (e) => {
    assert.ok(e instanceof InvalidInputError);
    assert.deepEqual([e.field, e.rule], ['status', 'must be an HTTP status code in 100..=599']);
    return true;
  });
  await assert.rejects(pool.reportHttp('api-key', 'k1', 'gpt', 429, { headers: [['only-a-name']] }), { field: 'headers' });
});

test('a dead key (401) is blocked everywhere until unblocked', async () => {
  const { clock, pool } = keys();
  pool.drainEvents();
  await pool.reportHttp('api-key', 'k1', 'gpt', 401);
  const blocked = pool.drainEvents().filter((e) => e.type === 'blocklisted');
  assert.deepEqual(
    blocked.map((e) => [e.value, e.context ?? null, e.untilMs ?? null, e.reason]),
    [['k1', null, null, 'auth_failed']],
  );
  clock.advance(10_000_000);
  const e = await refused(pool, 'claude');
  assert.deepEqual([e.blocked, e.retryAfterMs], [1, null]);
  assert.equal(pool.unblock('api-key', 'k1'), true);
  assert.ok(pool.tryAcquire('claude'));
});

test('a spent quota pauses the key for every model; retryAfterMs is refused where it means nothing', async () => {
  const { pool } = keys();
  pool.drainEvents();
  await pool.reportFailure('api-key', 'k1', 'gpt', 'quota_exhausted', { retryAfterMs: 3_600_000 });
  const cooled = pool.drainEvents().filter((e) => e.type === 'cooled');
  assert.deepEqual(cooled.map((e) => [e.context ?? null, e.untilMs, e.cause]), [[null, 3_600_000, 'quota_exhausted']]);
  const e = await refused(pool, 'claude');
  assert.deepEqual([e.rateLimited, e.retryAfterMs, e.noneRegistered], [1, 3_600_000, false]);
  await assert.rejects(pool.reportFailure('api-key', 'k1', 'gpt', 'timeout', { retryAfterMs: 1 }), {
    field: 'retry_after',
    rule: 'only rate_limited and quota_exhausted take one',
  });
});

test('a waiting acquire waits on the pool clock', async () => {
  const { clock, pool } = keys();
  await pool.reportFailure('api-key', 'k1', 'gpt', 'rate_limited', { retryAfterMs: 30_000 });
  setTimeout(() => clock.advance(30_000), 20);
  const lease = await pool.acquire('gpt', { timeoutMs: 60_000 });
  assert.deepEqual([lease.leaseKind, pool.now(), lease.expiresInMs], ['client', 30_000, 30_000]);
});

test('nothing registered is named', async () => {
  const pool = new Pool({ clock: new ManualClock() });
  const e = await refused(pool, 'gpt');
  assert.equal(e.noneRegistered, true);
  assert.match(e.message, /none registered/);
});

test('a kind nobody registered is refused at once, not waited for', async () => {
  // No timeout and a clock that never moves: only the refusal ends the call.
  const pool = new Pool({ clock: new ManualClock() });
  pool.register('proxy', '10.0.0.1:8080');
  const e = await pool.acquire('example.com', { kind: 'proxies' }).then(
    () => assert.fail('expected a refusal'),
    (e) => e,
  );
  assert.ok(e instanceof NoResourceAvailableError, String(e));
  assert.deepEqual([e.noneRegistered, e.settled, e.retryAfterMs], [true, true, null]);
});

test('fail-open grants the least-bad key and says so', async () => {
  const { pool } = keys({ failOpen: true });
  await pool.reportFailure('api-key', 'k1', 'gpt', 'rate_limited', { retryAfterMs: 60_000 });
  const lease = pool.tryAcquire('gpt');
  assert.deepEqual([lease.value, lease.leaseKind], ['k1', 'fail_open']);
});

test('recovery and cooling rules are options, checked with field and rule', async () => {
  for (const [recovery, due] of [['classic', true], ['probe', true], ['traffic', false]]) {
    const { clock, pool } = keys({ recovery });
    for (let i = 0; i < 3; i++) await pool.reportFailure('api-key', 'k1', 'gpt', 'slow', { latencyMs: 2000 });
    clock.advance(120_000);
    assert.equal(pool.dueForProbe().length > 0, due, recovery);
  }
  assert.throws(() => new Pool({ recovery: 'sometimes' }), { field: 'recovery', rule: 'must be one of traffic, probe, classic' });
  const { pool } = keys({ cooldowns: { timeout: { baseMs: 5_000, coolAfter: 1 } } });
  await pool.reportFailure('api-key', 'k1', 'gpt', 'timeout', { latencyMs: 1000 });
  assert.equal(pool.cells('api-key', 'k1')[1].coolingUntilMs, 5_000);
  const bad = [
    [{ timeout: { baseMs: 0 } }, 'policy.rules.base', 'must be > 0 and at most 30 days'],
    [{ timeout: { coolAfter: 0 } }, 'policy.rules.cool_after', 'must be >= 1'],
    [{ timeout: { maxExponent: 22 } }, 'policy.rules.max_exponent', 'must be in 0..=21'],
    [{ auth_failed: { baseMs: 1 } }, 'policy.rules', 'auth_failed blocks and has no cooling rule'],
  ];
  for (const [cooldowns, field, rule] of bad) {
    assert.throws(() => new Pool({ cooldowns }), { field, rule }, JSON.stringify(cooldowns));
  }
  assert.throws(() => new Pool({ cooldowns: { melted: { baseMs: 1 } } }), { field: 'policy.rules.kind' });
});

async function settle(check, ms = 10_000) {
  const until = Date.now() + ms;
  while (!check()) {
    assert.ok(Date.now() < until, 'the probe loop did not settle');
    await new Promise((r) => setTimeout(r, 10));
  }
}

test('the pool runs the probe loop with the user probe', async () => {
  const clock = new ManualClock();
  const seen = [];
  const probe = async ({ kind, value, context }) => {
    seen.push(`${kind}/${value}/${context}`);
    if (value === 'broken') throw new Error('probe crashed');
    if (value === 'overloaded') return 503;
    return value === 'good';
  };
  const pool = new Pool({ clock, strategy: 'first', recovery: 'probe', probe, probeEveryMs: 10 });
  for (const v of ['good', 'bad', 'broken', 'overloaded']) {
    pool.register('proxy', v);
    for (let i = 0; i < 3; i++) await pool.reportFailure('proxy', v, 'shop', 'timeout', { latencyMs: 1000 });
  }
  clock.advance(240_000);
  const cell = (v) => pool.cells('proxy', v)[1];
  await settle(() => cell('good').state === 'recovering' && ['bad', 'broken', 'overloaded'].every((v) => cell(v).consecutiveFailures === 4));
  assert.deepEqual([...new Set(seen)].sort(), ['proxy/bad/shop', 'proxy/broken/shop', 'proxy/good/shop', 'proxy/overloaded/shop']);
  assert.deepEqual([cell('bad').cause, cell('bad').coolingUntilMs], ['timeout', 720_000]);
  assert.equal(cell('overloaded').cause, 'connection_reset');
  assert.equal(pool.stats().liveLeases, 0);
  pool.close();
  assert.throws(() => new Pool({ probe }), { field: 'probe', rule: "goes with recovery: 'probe'" });
});
