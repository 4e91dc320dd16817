// PostgreSQL: sharded mode (one owner per tenant) and shared mode (every
// pool serves the tenant, the database grants the leases).
//
// Needs a server at REPUTE_TEST_PG_URL (`scripts/services.sh start`, then
// `export $(scripts/services.sh env)`); without it these tests fail, never
// skip. The database outlives test runs, so every test uses a tenant of its own.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';

import { Pool, ManualClock, NotOwnerError, NoResourceAvailableError } from 'repute';

function pgUrl() {
  const url = process.env.REPUTE_TEST_PG_URL;
  assert.ok(
    url,
    'REPUTE_TEST_PG_URL is not set: run `scripts/services.sh start` and `export $(scripts/services.sh env)` from the repository root',
  );
  return url;
}

const newTenant = () => `node-${randomUUID()}`;

/** Ends the tenant's owner lease in the database, as it ends for an owner
 * that could not renew in time. */
async function endOwnerLease(store, tenant) {
  await promisify(execFile)('psql', [
    store,
    '-v',
    'ON_ERROR_STOP=1',
    '-qc',
    `UPDATE repute_tenant SET expires_at = '-infinity' WHERE tenant = '${tenant}'`,
  ]);
}

test('sharded: a second pool is refused, naming the owner, until the first resigns', async () => {
  const store = pgUrl();
  const tenant = newTenant();
  const first = await Pool.open({ store, tenant, strategy: 'first' });
  first.register('proxy', 'a');
  await first.acquire('shop', { timeoutMs: 0 });
  const owner = `embedded pid ${process.pid}`;
  await assert.rejects(Pool.open({ store, tenant }), (e) => {
    assert.ok(e instanceof NotOwnerError);
    assert.equal(e.code, 'not_owner');
    assert.equal(e.owner, owner);
    return true;
  });
  assert.throws(() => new Pool({ store, tenant, mode: 'sharded' }), (e) => e instanceof NotOwnerError && e.owner === owner);
  first.close(); // gives the owner lease up at once

  const second = await Pool.open({ store, tenant, mode: 'sharded', ownerTtlMs: 5_000 });
  assert.deepEqual(
    second.resources().map((r) => r.value),
    ['a'],
    'the registration came back from the log',
  );
  // The first pool's lease is still live at the database (no checkpoint
  // carried it over), so the permit stays taken until it runs out.
  assert.equal(second.tryAcquire('shop'), null);
  second.close();
});

test('sharded: a pool whose owner lease lapsed stops serving', async () => {
  const store = pgUrl();
  const tenant = newTenant();
  const pool = await Pool.open({ store, tenant, ownerTtlMs: 1_000 });
  pool.register('proxy', 'a');
  // The database ends the owner lease, as it does for an owner that could
  // not renew in time (paused, cut off): renewal now fails, and the pool
  // refuses every call from then on instead of serving what it lost.
  await endOwnerLease(store, tenant);
  const successor = await Pool.open({ store, tenant });
  const end = performance.now() + 5_000;
  let refusal;
  while (refusal === undefined && performance.now() < end) {
    try {
      pool.stats();
      await sleep(50);
    } catch (e) {
      refusal = e;
    }
  }
  assert.ok(refusal instanceof NotOwnerError, `${refusal}`);
  assert.deepEqual(
    successor.resources().map((r) => r.value),
    ['a'],
  );
  successor.close();
  pool.close({ checkpoint: false });
});

test('shared: pools see each other\'s changes after sync and never share a permit', async () => {
  const store = pgUrl();
  const tenant = newTenant();
  const a = await Pool.open({ store, tenant, mode: 'shared', strategy: 'first' });
  const b = await Pool.open({ store, tenant, mode: 'shared', strategy: 'first' });
  try {
    assert.equal(a.register('proxy', 'x', { permits: 1 }), true);
    assert.ok(b.sync() >= 1);
    assert.deepEqual(
      b.resources().map((r) => r.value),
      ['x'],
    );

    const held = await a.acquire('shop', { timeoutMs: 0 });
    // B's core finds x free, but the database still holds A's lease.
    assert.equal(b.tryAcquire('shop'), null);
    await assert.rejects(b.acquire('shop', { timeoutMs: 200 }), NoResourceAvailableError);
    held.release();
    const taken = await b.acquire('shop', { timeoutMs: 5_000 });
    assert.ok(taken.token > held.token, `${taken.token} > ${held.token}`);

    const observations = (pool) => pool.cells('proxy', 'x').find((c) => c.context === 'shop')?.observations ?? 0;
    const before = observations(a);
    await taken.reportFailure('timeout', { latencyMs: 1_500 });
    taken.release();
    assert.ok((await a.syncAsync()) >= 1);
    assert.ok(observations(a) >= 1);
    assert.ok(observations(a) > before);
  } finally {
    a.close();
    b.close();
  }
});

test('shared: the database counts a key\'s limits across pools', async () => {
  const store = pgUrl();
  const tenant = newTenant();
  const a = await Pool.open({ store, tenant, mode: 'shared', strategy: 'first' });
  const b = await Pool.open({ store, tenant, mode: 'shared', strategy: 'first' });
  try {
    a.register('api-key', 'k1', { limits: { tpm: 100 } });
    assert.ok((await b.syncAsync()) >= 1);
    await b.withLease('gpt-4o', (lease) => lease.reconcile(30), { timeoutMs: 0, cost: 60 });
    // 30 + 70 tokens: the database counts what B's grant used, not its cost.
    await (await a.acquire('gpt-4o', { timeoutMs: 0, cost: 70 })).release();
    await assert.rejects(b.acquire('gpt-4o', { timeoutMs: 0 }), (e) => {
      assert.ok(e instanceof NoResourceAvailableError, String(e));
      assert.equal(e.limited, 1, '100 tokens a minute, of both pools');
      assert.ok(e.retryAfterMs > 50_000 && e.retryAfterMs <= 60_000, String(e.retryAfterMs));
      return true;
    });
  } finally {
    a.close();
    b.close();
  }
});

test('shared: the database counts a model\'s limits across pools', async () => {
  const store = pgUrl();
  const tenant = newTenant();
  const a = await Pool.open({ store, tenant, mode: 'shared', strategy: 'first' });
  const b = await Pool.open({ store, tenant, mode: 'shared', strategy: 'first' });
  try {
    a.register('api-key', 'k1', { limits: { perContext: { rpm: 1 } } });
    assert.ok((await b.syncAsync()) >= 1);
    await (await a.acquire('gpt-4o', { timeoutMs: 0 })).release();
    await assert.rejects(b.acquire('gpt-4o', { timeoutMs: 0 }), (e) => {
      assert.ok(e instanceof NoResourceAvailableError, String(e));
      assert.ok(e.retryAfterMs > 50_000 && e.retryAfterMs <= 60_000, String(e.retryAfterMs));
      return true;
    });
    await (await b.acquire('o1', { timeoutMs: 0 })).release();
  } finally {
    a.close();
    b.close();
  }
});

test('owner loss loses an auto-renewed lease once', async () => {
  const store = pgUrl();
  const tenant = newTenant();
  const pool = await Pool.open({ store, tenant, ownerTtlMs: 1_000, leaseTtlMs: 600 });
  pool.register('proxy', 'a');
  const lease = await pool.acquire('c', { autoRenew: true });
  const lost = [];
  lease.on('lost', (loss) => lost.push(loss));
  // The database ends the owner lease, as for an owner cut off too long.
  await endOwnerLease(store, tenant);
  const successor = await Pool.open({ store, tenant });
  const end = performance.now() + 10_000;
  while (lost.length === 0 && performance.now() < end) await sleep(20);
  await sleep(500);
  assert.deepEqual(lost, ['owner_lost']);
  assert.equal(lease.valid, false);
  successor.close();
  pool.close({ checkpoint: false });
});

test('releasing a lost lease still frees the permit at the database', async () => {
  const store = pgUrl();
  const tenant = newTenant();
  const clock = new ManualClock();
  const a = await Pool.open({ store, tenant, mode: 'shared', strategy: 'first', clock, leaseTtlMs: 20_000 });
  const b = await Pool.open({ store, tenant, mode: 'shared', strategy: 'first' });
  try {
    a.register('proxy', 'x');
    b.sync();
    const lease = await a.acquire('shop', { timeoutMs: 0 });
    // A's clock jumps past the TTL (a process paused past its lease): A's
    // pool ends the lease, but the database's grant runs 20 s more.
    clock.advance(21_000);
    assert.equal(lease.valid, false);
    assert.equal(b.tryAcquire('shop'), null);
    // The release is conditional on A's token at the database: the permit
    // frees now instead of when the database's grant runs out.
    assert.equal(await lease.release(), false);
    const taken = await b.acquire('shop', { timeoutMs: 5_000 });
    assert.ok(taken.token > lease.token);
    await taken.release();
  } finally {
    a.close();
    b.close();
  }
});
