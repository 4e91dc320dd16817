// Per-resource usage limits: `rpm`, `tpm` with each lease's `cost` and its
// reconciled use, `minIntervalMs`, `maxUses` and `maxAgeMs`, on tryAcquire,
// acquire and withLease alike. The pools are on a manual clock and select
// with the `first` strategy, so every grant, refusal and wait is exact.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';

import { Pool, ManualClock, InvalidInputError, NoResourceAvailableError, UnknownLeaseError } from 'repute';

function keys() {
  const clock = new ManualClock();
  return { clock, pool: new Pool({ clock, strategy: 'first' }) };
}

/** The refusal of an acquire that may not wait. */
async function refusal(pool, options = {}) {
  try {
    await pool.acquire('gpt-4o', { timeoutMs: 0, ...options });
  } catch (e) {
    assert.ok(e instanceof NoResourceAvailableError, String(e));
    return e;
  }
  assert.fail('granted');
}

/** Acquires and releases at once; the granted value. */
async function once(pool, options = {}) {
  const lease = await pool.acquire('gpt-4o', { timeoutMs: 0, ...options });
  await lease.release();
  return lease.value;
}

test('rpm grants a key rpm times a minute, then says when the next grant fits', async () => {
  const { clock, pool } = keys();
  assert.equal(pool.register('api-key', 'k1', { limits: { rpm: 3 } }), true);
  assert.equal(await once(pool), 'k1');
  clock.advance(1_000);
  assert.equal((await refusal(pool)).retryAfterMs, 19_000, 'three a minute are spread over it: one every 20 s');
  for (let i = 0; i < 2; i++) {
    clock.advance(19_000);
    assert.equal(await once(pool), 'k1');
    clock.advance(1_000);
  }
  const e = await refusal(pool);
  assert.deepEqual(
    [e.code, e.limited, e.leased, e.cooling, e.blocked, e.noneRegistered, e.retryAfterMs],
    ['no_resource_available', 1, 0, 0, 0, false, 19_000],
  );
  assert.equal(pool.tryAcquire('gpt-4o'), null);
  assert.equal(pool.stats().available, 0, 'a key over its limit is out of selection');
  clock.advance(18_999);
  assert.equal(pool.tryAcquire('gpt-4o'), null);
  clock.advance(1);
  assert.equal(await pool.withLease('gpt-4o', async (lease) => lease.value, { timeoutMs: 0 }), 'k1');
  const [view] = pool.resources();
  assert.deepEqual([view.limits, view.uses, view.retired], [{ rpm: 3 }, 4, undefined]);
  pool.close();
});

test('another key takes the traffic while one is over its rpm', async () => {
  const { pool } = keys();
  pool.register('api-key', 'k1', { limits: { rpm: 1 } });
  pool.register('api-key', 'k2');
  const first = await pool.acquire('gpt-4o');
  const second = await pool.acquire('gpt-4o');
  assert.deepEqual([first.value, second.value], ['k1', 'k2']);
  await first.release();
  const e = await refusal(pool);
  assert.deepEqual([e.limited, e.leased], [1, 1], 'k1 is over its rpm, k2 is leased');
  await second.release();
  assert.equal(await once(pool), 'k2');
  pool.close();
});

test('tpm reserves the cost and counts the reconciled use', async () => {
  const { clock, pool } = keys();
  pool.register('api-key', 'k1', { permits: 4, limits: { tpm: 100 } });
  assert.equal(await once(pool, { cost: 60 }), 'k1');
  clock.advance(1_000);
  const e = await refusal(pool, { cost: 60 });
  assert.deepEqual([e.limited, e.retryAfterMs], [1, 59_000]);
  const reported = await pool.acquire('gpt-4o', { cost: 30 });
  await reported.reportHttp(200, { latencyMs: 200, usage: 5 }); // 60 + 5 counted, not 60 + 30
  await reported.release();
  await pool.withLease('gpt-4o', (lease) => lease.reconcile(10n), { cost: 35 }); // 60 + 5 + 10
  assert.equal(pool.tryAcquire('gpt-4o', { cost: 26 }), null);
  const last = pool.tryAcquire('gpt-4o', { cost: 25n });
  assert.notEqual(last, null);
  await last.reportSuccess({ latencyMs: 100, usage: 26 }); // one token over: 101
  await last.release();
  await assert.rejects(last.reconcile(1), UnknownLeaseError);
  assert.equal(pool.tryAcquire('gpt-4o'), null);
  clock.advance(59_000);
  const freed = pool.tryAcquire('gpt-4o', { cost: 59 });
  assert.notEqual(freed, null, 'the first grant left the window: 5 + 10 + 26 + 59 tokens');
  await freed.release();
  const huge = await refusal(pool, { cost: 101 });
  assert.deepEqual([huge.noneRegistered, huge.limited], [true, 0], "a cost above a key's tpm is never served by it");
  assert.deepEqual(pool.resources()[0].limits, { tpm: 100 });
  pool.close();
});

test('reconciling a lease lets its window serve more', async () => {
  const { pool } = keys();
  pool.register('api-key', 'k1', { permits: 3, limits: { tpm: 100 } });
  const first = await pool.acquire('gpt-4o', { cost: 50 });
  const second = await pool.acquire('gpt-4o', { cost: 50 });
  assert.equal(pool.tryAcquire('gpt-4o'), null);
  await first.reportFailure('timeout', { latencyMs: 1_000, usage: 0 });
  const third = pool.tryAcquire('gpt-4o', { cost: 50 });
  assert.equal(third.permit, 2);
  for (const lease of [first, second, third]) await lease.release();
  pool.close();
});

test('minIntervalMs spaces grants', async () => {
  const { clock, pool } = keys();
  pool.register('api-key', 'k1', { limits: { minIntervalMs: 2_000 } });
  await once(pool);
  clock.advance(500);
  const e = await refusal(pool);
  assert.deepEqual([e.limited, e.retryAfterMs], [1, 1_500]);
  clock.advance(1_500);
  assert.equal(await once(pool), 'k1');
  assert.deepEqual(pool.resources()[0].limits, { minIntervalMs: 2_000 });
  pool.close();
});

test('maxUses retires a key with an event', async () => {
  const { clock, pool } = keys();
  pool.register('api-key', 'k1', { limits: { maxUses: 2 } });
  pool.register('api-key', 'k2');
  pool.drainEvents();
  clock.advance(1_000);
  for (let i = 0; i < 2; i++) assert.equal(await once(pool), 'k1');
  const events = pool.drainEvents();
  assert.deepEqual(
    events.map((e) => e.type),
    ['leased', 'released', 'leased', 'retired', 'released'],
  );
  const { type, atMs, kind, value, reason } = events[3];
  assert.deepEqual({ type, atMs, kind, value, reason }, { type: 'retired', atMs: 1_000, kind: 'api-key', value: 'k1', reason: 'max_uses' });
  const held = await pool.acquire('gpt-4o');
  assert.equal(held.value, 'k2', 'k1 is retired');
  const e = await refusal(pool);
  assert.deepEqual([e.limited, e.leased], [1, 1]);
  const views = Object.fromEntries(pool.resources().map((r) => [r.value, r]));
  assert.deepEqual([views.k1.retired, views.k1.uses, views.k1.limits], ['max_uses', 2, { maxUses: 2 }]);
  assert.deepEqual([views.k2.retired, views.k2.limits], [undefined, {}]);
  await held.release();
  assert.equal(pool.register('api-key', 'k1', { limits: { maxUses: 3 } }), true, 'new limits judge it afresh');
  assert.equal(await once(pool), 'k1');
  pool.close();
});

test('maxAgeMs retires a key when it is due', async () => {
  const { clock, pool } = keys();
  pool.register('api-key', 'k1', { limits: { maxAgeMs: 30_000 } });
  pool.drainEvents();
  clock.advance(29_000);
  await once(pool);
  clock.advance(1_000);
  pool.stats();
  const retired = pool.drainEvents().filter((e) => e.type === 'retired');
  assert.deepEqual(
    retired.map((e) => [e.value, e.reason, e.atMs]),
    [['k1', 'max_age', 30_000]],
  );
  const e = await refusal(pool);
  assert.deepEqual([e.limited, e.retryAfterMs], [1, null], 'retired for good');
  const [view] = pool.resources();
  assert.deepEqual([view.retired, view.limits], ['max_age', { maxAgeMs: 30_000 }]);
  pool.close();
});

test('the limits view registers them again', () => {
  const { pool } = keys();
  const given = { rpm: 60, tpm: 90_000, minIntervalMs: 250, maxUses: 10_000, maxAgeMs: 86_400_000 };
  pool.register('api-key', 'k1', { limits: given });
  const { limits } = pool.resources()[0];
  assert.deepEqual(limits, given);
  assert.equal(pool.register('api-key', 'k1', { limits }), false, 'the same limits: nothing changed');
  assert.equal(pool.register('api-key', 'k1', { limits: { ...limits, tpm: 90_000n, maxUses: 10_000n } }), false);
  assert.equal(pool.register('api-key', 'k1'), true, 'registering without them removes them');
  assert.deepEqual(pool.resources()[0].limits, {});
  pool.close();
});

const BAD_LIMITS = [
  [{ rpm: 0 }, 'limits.rpm', 'must be in 1..=100000'],
  [{ rpm: 100_001 }, 'limits.rpm', 'must be in 1..=100000'],
  [{ rpm: -1 }, 'limits.rpm', 'must be an integer in 0..2^32'],
  [{ rpm: '60' }, 'limits.rpm', 'must be an integer in 0..2^32'],
  [{ tpm: 0 }, 'limits.tpm', 'must be > 0'],
  [{ tpm: 1n << 64n }, 'limits.tpm', 'must be an integer in 0..2^64'],
  [{ tpm: 1.5 }, 'limits.tpm', 'must be a non-negative safe integer or a bigint'],
  [{ minIntervalMs: 0 }, 'limits.minIntervalMs', 'must be > 0'],
  [{ minIntervalMs: -1 }, 'limits.minIntervalMs', 'must be a finite number of milliseconds >= 0'],
  [{ minIntervalMs: '1s' }, 'limits.minIntervalMs', 'must be a number'],
  [{ maxUses: 0 }, 'limits.maxUses', 'must be > 0'],
  [{ maxUses: -3 }, 'limits.maxUses', 'must be a non-negative safe integer or a bigint'],
  [{ maxAgeMs: 0 }, 'limits.maxAgeMs', 'must be > 0'],
  [{ maxAgeMs: Infinity }, 'limits.maxAgeMs', 'must be a finite number of milliseconds >= 0'],
];

test('bad limits name their field', () => {
  const { pool } = keys();
  for (const [limits, field, rule] of [...BAD_LIMITS, ['60', 'limits', 'must be an object']]) {
    assert.throws(
      () => pool.register('api-key', 'k1', { limits }),
      (e) => {
        assert.ok(e instanceof InvalidInputError, String(e));
        assert.deepEqual([e.code, e.field, e.rule, e.message], ['invalid_input', field, rule, `invalid ${field}: ${rule}`]);
        return true;
      },
      JSON.stringify(limits, (_, v) => (typeof v === 'bigint' ? String(v) : v)),
    );
  }
  assert.deepEqual(pool.resources(), [], 'nothing was registered');
  pool.close();
});

test('bad costs and uses name their field', async () => {
  const { pool } = keys();
  pool.register('api-key', 'k1', { limits: { tpm: 100 } });
  const named = (field, rule) => (e) => {
    assert.ok(e instanceof InvalidInputError, String(e));
    assert.deepEqual([e.field, e.rule], [field, rule]);
    return true;
  };
  const positive = named('cost', 'must be > 0');
  const whole = (field) => named(field, 'must be a non-negative safe integer or a bigint');
  assert.throws(() => pool.tryAcquire('c', { cost: 0 }), positive);
  await assert.rejects(pool.acquire('c', { cost: 0 }), positive);
  await assert.rejects(pool.withLease('c', async () => 1, { cost: 0n }), positive);
  assert.throws(() => pool.tryAcquire('c', { cost: -1 }), whole('cost'));
  await assert.rejects(pool.acquire('c', { cost: '10' }), whole('cost'));
  await assert.rejects(pool.acquire('c', { cost: 1n << 64n }), named('cost', 'must be an integer in 0..2^64'));
  const lease = await pool.acquire('c', { cost: 10 });
  await assert.rejects(lease.reconcile(-1), whole('used'));
  await assert.rejects(lease.reconcile(1n << 64n), named('used', 'must be an integer in 0..2^64'));
  await assert.rejects(lease.reportSuccess({ usage: 1.5 }), whole('usage'));
  await assert.rejects(lease.reportHttp(200, { usage: 1n << 64n }), named('usage', 'must be an integer in 0..2^64'));
  await lease.release();
  assert.equal(pool.resources()[0].uses, 1);
  pool.close();
});

test('a waiting acquire is granted when the window frees up', async () => {
  const { clock, pool } = keys();
  pool.register('api-key', 'k1', { limits: { rpm: 2, tpm: 100 } });
  await pool.withLease('gpt-4o', (lease) => lease.reconcile(10), { cost: 40 });
  clock.advance(30_000);
  await pool.withLease('gpt-4o', (lease) => lease.reportSuccess({ usage: 20 }), { cost: 50 });
  const e = await refusal(pool);
  assert.deepEqual([e.limited, e.retryAfterMs], [1, 30_000]);
  const waiter = pool.acquire('gpt-4o', { cost: 70 });
  let settled = false;
  waiter.finally(() => (settled = true)).catch(() => {});
  await sleep(50);
  assert.equal(settled, false, 'the window is full');
  clock.advance(30_000);
  const lease = await waiter;
  assert.equal(lease.value, 'k1');
  await lease.release();
  assert.deepEqual([pool.resources()[0].limits, pool.resources()[0].uses], [{ rpm: 2, tpm: 100 }, 3]);
  pool.close();
});

test('the event stream carries retired', async () => {
  const { clock, pool } = keys();
  pool.register('api-key', 'k1', { limits: { maxUses: 1 } });
  pool.register('api-key', 'k2', { limits: { maxAgeMs: 10_000 } });
  pool.drainEvents();
  const events = pool.events();
  assert.equal(await once(pool), 'k1');
  clock.advance(10_000);
  pool.stats();
  const retired = [];
  for await (const e of events) {
    if (e.type === 'retired') retired.push([e.value, e.reason, e.atMs]);
    if (retired.length === 2) break;
  }
  assert.deepEqual(retired, [
    ['k1', 'max_uses', 0],
    ['k2', 'max_age', 10_000],
  ]);
  const e = await refusal(pool);
  assert.deepEqual([e.limited, e.retryAfterMs], [2, null]);
  pool.close();
});

test('per-context limits count each model of a key apart', async () => {
  const { clock, pool } = keys();
  assert.equal(pool.register('api-key', 'k1', { limits: { perContext: { rpm: 2, tpm: 10n } } }), true);
  assert.equal(await once(pool, { cost: 4 }), 'k1');
  clock.advance(30_000);
  assert.equal(await once(pool, { cost: 4 }), 'k1');
  const e = await refusal(pool);
  assert.deepEqual([e.limited, e.retryAfterMs], [1, 30_000], "gpt-4o's two grants a minute are spent");
  const other = await pool.acquire('o1', { timeoutMs: 0, cost: 10 });
  assert.equal(other.value, 'k1', 'another model of the same key has its own window');
  await other.release();
  const [view] = pool.resources();
  assert.deepEqual(view.limits, { perContext: { rpm: 2, tpm: 10 } });
  assert.equal(pool.register('api-key', 'k1', { limits: view.limits }), false, "a view's limits register them again");
  clock.advance(30_000);
  assert.equal(await once(pool), 'k1');
  assert.throws(
    () => pool.register('api-key', 'k2', { limits: { perContext: { minIntervalMs: 0 } } }),
    (err) => err instanceof InvalidInputError && err.field === 'limits.perContext.minIntervalMs',
  );
  assert.deepEqual(pool.resources().map((r) => r.value), ['k1'], 'nothing half-applied');
  pool.close();
});
