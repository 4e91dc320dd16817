// The lease cycle on a ManualClock: grant, renew, local deadline, report,
// release, and the scoping helpers (withLease, Symbol.dispose/asyncDispose).
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { Pool, ManualClock, Lease, NoResourceAvailableError } from 'repute';

function fixture(options = {}) {
  const clock = new ManualClock();
  const pool = new Pool({ clock, strategy: 'first', leaseTtlMs: 10_000, ...options });
  return { clock, pool };
}

test('a lease is granted, renewed, reported on and released', async () => {
  const { clock, pool } = fixture();
  assert.equal(pool.register('proxy', 'a'), true);
  assert.equal(pool.register('proxy', 'a'), false);

  const lease = pool.tryAcquire('example.com');
  assert.ok(lease instanceof Lease);
  assert.equal(lease.kind, 'proxy');
  assert.equal(lease.value, 'a');
  assert.equal(lease.context, 'example.com');
  assert.equal(lease.permit, 0);
  assert.equal(lease.leaseKind, 'client');
  assert.equal(lease.token, 1n);
  assert.equal(lease.id, 1n);
  assert.equal(lease.ttlMs, 10_000);
  assert.equal(lease.expiresInMs, 10_000);
  assert.equal(lease.valid, true);
  assert.equal(pool.tryAcquire('example.com'), null, 'the only permit is leased');

  clock.advance(4_000);
  assert.equal(lease.expiresInMs, 6_000);
  assert.equal(await lease.renew(), lease);
  assert.equal(lease.expiresInMs, 10_000);
  assert.equal(lease.token, 1n, 'renewal keeps the fencing token');

  // Local deadline: renewal sent at 4000 + TTL 10000 - margin 1000.
  clock.advance(8_999);
  assert.equal(lease.valid, true);
  clock.advance(1);
  assert.equal(lease.valid, false);
  assert.equal(lease.expiresInMs, 1_000, 'the authority still holds it');

  await lease.reportSuccess({ latencyMs: 12 });
  const [global, cell] = pool.cells('proxy', 'a');
  assert.equal(global.context, undefined);
  assert.equal(cell.context, 'example.com');
  assert.equal(cell.score, 5);
  assert.equal(cell.observations, 1);
  assert.equal(cell.latencyMs, 12);

  lease.release();
  lease.release(); // idempotent
  assert.equal(lease.valid, false);
  assert.equal(pool.stats().liveLeases, 0);
  const next = pool.tryAcquire('example.com');
  assert.equal(next.token, 2n, 'fencing tokens strictly increase');
  next.release();
});

test('a lease that lapses at the authority is lost on renewal', async () => {
  const { clock, pool } = fixture();
  pool.register('proxy', 'a');
  const lease = pool.tryAcquire('c');
  clock.advance(10_000);
  await assert.rejects(lease.renew(), { name: 'LeaseExpiredError', code: 'lease_expired' });
  assert.equal(lease.valid, false);
  lease.release(); // a lost lease releases quietly
  assert.equal(pool.tryAcquire('c').token, 2n);
});

test('renewMarginMs sets the local deadline', () => {
  const { clock, pool } = fixture({ renewMarginMs: 2_500 });
  pool.register('proxy', 'a');
  const lease = pool.tryAcquire('c');
  clock.advance(7_499);
  assert.equal(lease.valid, true);
  clock.advance(1);
  assert.equal(lease.valid, false);
});

test('lease.reportFailure folds into the context cell', async () => {
  const { pool } = fixture();
  pool.register('proxy', 'a');
  const lease = pool.tryAcquire('c');
  await lease.reportFailure('timeout', { latencyMs: 900 });
  lease.release();
  const cell = pool.cells('proxy', 'a')[1];
  assert.equal(cell.score, -5);
  assert.equal(cell.consecutiveFailures, 1);
});

test('withLease releases after the callback returns', async () => {
  const { pool } = fixture();
  pool.register('proxy', 'a');
  let seen;
  const result = await pool.withLease('c', async (lease) => {
    seen = lease;
    assert.equal(lease.valid, true);
    assert.equal(pool.stats().liveLeases, 1);
    return 42;
  });
  assert.equal(result, 42);
  assert.equal(seen.valid, false);
  assert.equal(pool.stats().liveLeases, 0);
});

test('withLease releases when the callback throws, and rethrows', async () => {
  const { pool } = fixture();
  pool.register('proxy', 'a');
  const boom = new Error('boom');
  await assert.rejects(
    pool.withLease('c', async () => {
      throw boom;
    }),
    (e) => e === boom,
  );
  assert.equal(pool.stats().liveLeases, 0);
  assert.equal(pool.tryAcquire('c').token, 2n);
});

test('withLease rejects if the lease expired while the callback ran', async () => {
  const { clock, pool } = fixture();
  pool.register('proxy', 'a');
  await assert.rejects(
    pool.withLease('c', async () => {
      clock.advance(10_000);
      return 'done';
    }),
    { name: 'LeaseExpiredError' },
  );
});

test('Symbol.dispose and Symbol.asyncDispose release the lease', async () => {
  const { pool } = fixture();
  pool.register('proxy', 'a');
  const a = pool.tryAcquire('c');
  a[Symbol.dispose]();
  assert.equal(pool.stats().liveLeases, 0);
  const b = pool.tryAcquire('c');
  await b[Symbol.asyncDispose]();
  assert.equal(pool.stats().liveLeases, 0);
  b[Symbol.dispose](); // already released: nothing happens
});

test('acquire waits for a release and is woken by it', async () => {
  const pool = new Pool({ strategy: 'first' });
  pool.register('proxy', 'a');
  const held = pool.tryAcquire('c');
  setTimeout(() => held.release(), 20);
  const started = performance.now();
  const lease = await pool.acquire('c', { timeoutMs: 5_000 });
  assert.ok(performance.now() - started < 1_000);
  assert.equal(lease.token, 2n);
  lease.release();
  pool.close();
});

test('acquire times out with the pool retryAfterMs, on the pool clock', async () => {
  const { clock, pool } = fixture();
  await assert.rejects(pool.acquire('c', { timeoutMs: 0 }), (e) => {
    assert.ok(e instanceof NoResourceAvailableError);
    assert.equal(e.retryAfterMs, null, 'nothing registered: no timer will help');
    return true;
  });
  pool.register('proxy', 'a');
  const held = pool.tryAcquire('c');
  // Nothing ends the wait until the pool's clock gets past the timeout.
  setTimeout(() => clock.advance(30), 30);
  await assert.rejects(pool.acquire('c', { timeoutMs: 30 }), (e) => {
    assert.ok(e instanceof NoResourceAvailableError);
    assert.equal(e.code, 'no_resource_available');
    assert.equal(e.retryAfterMs, 9_970, 'the held lease expires one TTL after its grant');
    assert.equal(e.leased, 1);
    return true;
  });
  held.release();
});

test('acquire honours an AbortSignal', async () => {
  const { pool } = fixture();
  pool.register('proxy', 'a');
  pool.tryAcquire('c');
  const controller = new AbortController();
  setTimeout(() => controller.abort(new Error('stop')), 10);
  await assert.rejects(pool.acquire('c', { timeoutMs: 60_000, signal: controller.signal }), { message: 'stop' });
});

test('probe leases come from dueForProbe', async () => {
  // Probes are the recovery of the classic (reputation-pool 0.5.0) rules.
  const { clock, pool } = fixture({ recovery: 'classic' });
  pool.register('proxy', 'a');
  for (let i = 0; i < 3; i++) await pool.reportFailure('proxy', 'a', 'c', 'timeout', { latencyMs: 1 });
  const cell = pool.cells('proxy', 'a')[1];
  assert.equal(cell.state, 'cooling');
  assert.equal(cell.cause, 'timeout');
  assert.deepEqual(pool.dueForProbe(), []);
  clock.set(cell.coolingUntilMs);
  assert.deepEqual(pool.dueForProbe(), [{ kind: 'proxy', value: 'a', context: 'c' }]);
  const probe = pool.acquireForProbe('proxy', 'a', 'c');
  assert.equal(probe.leaseKind, 'probe');
  assert.equal(probe.ttlMs, 15_000);
  probe.release();
});
