// Every error class, each from a real trigger in the pool or its store.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import * as repute from 'repute';
import {
  Pool,
  ManualClock,
  ReputeError,
  InvalidInputError,
  NoResourceAvailableError,
  StaleLeaseError,
  LeaseExpiredError,
  BudgetExhaustedError,
  RateLimitedError,
  StoreError,
  NotOwnerError,
  UnknownResourceError,
  UnknownLeaseError,
  BlockedError,
  LeasedError,
  InvalidSnapshotError,
  PoolClosedError,
  InternalError,
} from 'repute';

const native = createRequire(import.meta.url)('../repute.node');

/** `retry_after` → `retryAfterMs` (a duration), `none_registered` → `noneRegistered`. */
const camel = (name) => name.replace(/_(.)/g, (_, c) => c.toUpperCase()) + (name.endsWith('_after') ? 'Ms' : '');

function memoryPool(options = {}) {
  const clock = new ManualClock();
  return { clock, pool: new Pool({ clock, strategy: 'first', leaseTtlMs: 1_000, ...options }) };
}

async function rejectsTyped(promise, Class, fields) {
  let caught;
  await assert.rejects(promise, (e) => {
    assert.ok(e instanceof Class, `${e} is a ${Class.name}`);
    for (const [k, v] of Object.entries(fields)) assert.deepEqual(e[k], v, k);
    caught = e;
    return true;
  });
  return caught;
}

function throwsTyped(f, Class, fields) {
  let caught;
  assert.throws(f, (e) => {
    assert.ok(e instanceof Class, `${e} is a ${Class.name}`);
    assert.ok(e instanceof ReputeError);
    assert.equal(e.name, Class.name);
    for (const [k, v] of Object.entries(fields)) assert.deepEqual(e[k], v, k);
    caught = e;
    return true;
  });
  return caught;
}

test('every code of the host table is thrown as its class, with its fields, built natively', () => {
  const rows = native._errorCodes();
  const examples = native._errorExamples();
  assert.deepEqual(
    examples.map((e) => e.code),
    rows.map((r) => r.code),
  );
  for (const [i, row] of rows.entries()) {
    const e = examples[i];
    const Class = repute[row.class];
    assert.ok(Class, `${row.class} is exported`);
    assert.ok(e instanceof Class && e instanceof ReputeError && e instanceof Error, row.code);
    assert.equal(e.name, row.class);
    assert.equal(Object.getPrototypeOf(e), Class.prototype, `${row.code} is a ${row.class} itself`);
    for (const field of row.fields) assert.ok(camel(field) in e, `${row.code}.${camel(field)}`);
    assert.doesNotMatch(e.message, /^\{|"repute"| ns\b/, 'plain text, in ms');
    assert.match(e.stack, new RegExp(`^${row.class}: `));
  }
  const byCode = Object.fromEntries(examples.map((e) => [e.code, e]));
  assert.deepEqual(
    { ...byCode.no_resource_available },
    {
      name: 'NoResourceAvailableError',
      code: 'no_resource_available',
      retryAfterMs: 1500,
      expectedAfterMs: 290_000,
      noneRegistered: false,
      blocked: 1,
      rateLimited: 1,
      cooling: 1,
      leased: 0,
      limited: 0,
      settled: true,
    },
  );
  assert.equal(byCode.no_resource_available.message, 'no resource available (1 blocked, 1 rate limited, 1 cooling; retry after 1500 ms, expected after 290000 ms)');
  assert.equal(byCode.rate_limited.retryAfterMs, 250);
  assert.equal(byCode.rate_limited.settled, true);
  assert.equal(byCode.rate_limited.message, 'rate limited (retry after 250 ms)');
  const conflict = byCode.storage_conflict;
  assert.deepEqual([conflict.expected, conflict.found, conflict.mine, conflict.stored], [1, 2, null, null]);
  const epoch = byCode.stale_epoch;
  assert.deepEqual([epoch.expected, epoch.found, epoch.mine, epoch.stored], [null, null, 3, 4]);
  assert.deepEqual([byCode.invalid_snapshot.reason, byCode.invalid_snapshot.field, byCode.invalid_snapshot.rule], ['invalid', 'policy', 'bad']);
  assert.ok(byCode.trap instanceof InternalError && byCode.runtime instanceof InternalError);
  assert.ok(byCode.closed instanceof PoolClosedError);
  assert.equal(byCode.not_owner.owner, 'pid 7');
  assert.equal(byCode.leased.live, 2);
  const exported = Object.entries(repute)
    .filter(([, v]) => typeof v === 'function' && v.prototype instanceof ReputeError)
    .map(([k]) => k)
    .sort();
  assert.deepEqual(exported, [...new Set(rows.map((r) => r.class))].sort());
});

test('async calls reject with the same typed errors', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'repute-node-'));
  try {
    await assert.rejects(Pool.open({ store: `sqlite:${join(dir, 'missing', 'pool.db')}` }), (e) => {
      assert.ok(e instanceof StoreError);
      assert.equal(e.code, 'storage_unavailable');
      assert.deepEqual([e.expected, e.found, e.mine, e.stored], [null, null, null, null]);
      assert.doesNotMatch(e.message, /^\{/);
      return true;
    });
    const pool = await Pool.open({ store: `sqlite:${join(dir, 'pool.db')}`, rateLimit: { rate: 2, burst: 1 }, clock: new ManualClock() });
    pool.register('proxy', 'a', { permits: 2 });
    await pool.acquire('c');
    await assert.rejects(pool.acquire('c', { timeoutMs: 0 }), (e) => {
      assert.ok(e instanceof RateLimitedError);
      assert.deepEqual([e.code, e.retryAfterMs, e.message], ['rate_limited', 500, 'rate limited (retry after 500 ms)']);
      return true;
    });
    await assert.rejects(pool.reportSuccess('proxy', 'nope', 'c'), UnknownResourceError);
    pool.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('InvalidInputError names the field and the rule, from the core and from the binding', async () => {
  const { pool } = memoryPool();
  throwsTyped(() => pool.register('', 'a'), InvalidInputError, {
    code: 'invalid_input',
    field: 'resource.kind',
    rule: 'must not be empty',
  });
  throwsTyped(() => pool.tryAcquire('*'), InvalidInputError, { field: 'context' });
  throwsTyped(() => pool.register('proxy', 'a', { permits: 0 }), InvalidInputError, { field: 'permits' });
  throwsTyped(() => new Pool({ leaseTtlMs: -1 }), InvalidInputError, {
    field: 'leaseTtlMs',
    rule: 'must be a finite number of milliseconds >= 0',
  });
  throwsTyped(() => new Pool({ leaseTtlMs: 0 }), InvalidInputError, { field: 'leaseTtlMs', rule: 'must be > 0' });
  throwsTyped(() => new Pool({ strategy: 'best' }), InvalidInputError, { field: 'strategy' });
  for (const store of ['mysql://db', 'sqlite:', 'Memory', '']) {
    throwsTyped(() => new Pool({ store }), InvalidInputError, { code: 'invalid_input', field: 'store' });
  }
  throwsTyped(() => new Pool({ store: 42 }), InvalidInputError, { field: 'store', rule: 'must be a string' });
  throwsTyped(() => new Pool({ mode: 'solo' }), InvalidInputError, {
    field: 'mode',
    rule: 'must be "sharded" or "shared"',
  });
  for (const ownerTtlMs of [0, -1, NaN, Infinity]) {
    throwsTyped(() => new Pool({ ownerTtlMs }), InvalidInputError, { field: 'ownerTtlMs' });
  }
  await assert.rejects(Pool.open({ mode: 'solo' }), { name: 'InvalidInputError', field: 'mode' });
  throwsTyped(() => new Pool({ seed: -1 }), InvalidInputError, { field: 'seed' });
  throwsTyped(() => new Pool({ seed: 1n << 64n }), InvalidInputError, { field: 'seed' });
  throwsTyped(() => pool.tryAcquire(42), InvalidInputError, { field: 'context', rule: 'must be a string' });
  await assert.rejects(pool.reportFailure('proxy', 'a', 'c', 'gremlins'), { name: 'InvalidInputError', field: 'failure.kind' });
});

test('NoResourceAvailableError carries retryAfterMs', async () => {
  const { pool } = memoryPool();
  pool.register('proxy', 'a');
  pool.tryAcquire('c');
  await assert.rejects(pool.acquire('c', { timeoutMs: 0 }), (e) => {
    assert.ok(e instanceof NoResourceAvailableError);
    assert.equal(e.retryAfterMs, 1_000);
    return true;
  });
});

test('StaleLeaseError: a holder whose lease was superseded by a restored state', async () => {
  // Pool B's snapshot has lease 2 on token 2; pool A's holder of lease 2
  // has token 1. After A restores B's state, A's holder is stale.
  const b = memoryPool().pool;
  b.register('proxy', 'a');
  b.tryAcquire('c').release();
  b.tryAcquire('c');
  const snapshot = b.snapshot();

  const a = memoryPool().pool;
  a.register('proxy', 'a');
  a.register('proxy', 'b');
  a.tryAcquire('c');
  const holder = a.tryAcquire('c');
  assert.deepEqual([holder.id, holder.token, holder.value], [2n, 1n, 'b']);
  a.restore(snapshot);
  const e = await rejectsTyped(holder.renew(), StaleLeaseError, { code: 'stale_lease' });
  // The stale holder is not told the token that fences it out.
  assert.equal('currentToken' in e, false);
  assert.doesNotMatch(e.message, /2/);
  // Releasing it raises nothing and says it had been lost.
  assert.equal(await holder.release(), false);
});

test('LeaseExpiredError after the TTL ran out', async () => {
  const { clock, pool } = memoryPool();
  pool.register('proxy', 'a');
  const lease = pool.tryAcquire('c');
  clock.advance(1_000);
  await rejectsTyped(lease.renew(), LeaseExpiredError, { code: 'lease_expired' });
  assert.equal(await lease.release(), false);
});

test('BudgetExhaustedError when a budget would be exceeded', () => {
  const { pool } = memoryPool({ maxResources: 1 });
  pool.register('proxy', 'a');
  throwsTyped(() => pool.register('proxy', 'b'), BudgetExhaustedError, {
    code: 'budget_exhausted',
    budget: 'max_resources',
    limit: 1,
  });
  assert.equal(pool.resources().length, 1, 'nothing half-applied');
});

test('RateLimitedError from the acquire token bucket', async () => {
  const { pool } = memoryPool({ rateLimit: { rate: 2, burst: 1 } });
  pool.register('proxy', 'a', { permits: 4 });
  pool.tryAcquire('c');
  throwsTyped(() => pool.tryAcquire('c'), RateLimitedError, {
    code: 'rate_limited',
    retryAfterMs: 500,
    settled: true,
    message: 'rate limited (retry after 500 ms)',
  });
  await assert.rejects(pool.acquire('c', { timeoutMs: 0 }), RateLimitedError);
});

test('StoreError when the SQLite store cannot be opened', () => {
  const dir = mkdtempSync(join(tmpdir(), 'repute-node-'));
  try {
    throwsTyped(() => new Pool({ store: `sqlite:${join(dir, 'missing', 'pool.db')}` }), StoreError, {
      code: 'storage_unavailable',
      expected: null,
      stored: null,
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('NotOwnerError while another pool owns the tenant of a SQLite file', () => {
  const dir = mkdtempSync(join(tmpdir(), 'repute-node-'));
  const store = `sqlite:${join(dir, 'pool.db')}`;
  try {
    const owner = new Pool({ store, tenant: 't' });
    assert.throws(
      () => new Pool({ store, tenant: 't' }),
      (e) => e instanceof NotOwnerError && e.code === 'not_owner' && e.owner === `process ${process.pid} (tenant "t")`,
    );
    new Pool({ store, tenant: 'other' }).close(); // another tenant of the same file is free
    owner.close();
    new Pool({ store, tenant: 't' }).close(); // closing hands the tenant back
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('UnknownResourceError, UnknownLeaseError, BlockedError, LeasedError', async () => {
  const { pool } = memoryPool();
  throwsTyped(() => pool.cells('proxy', 'nope'), UnknownResourceError, { code: 'unknown_resource' });

  pool.register('proxy', 'a', { permits: 2 });
  const empty = pool.snapshot();
  const lease = pool.tryAcquire('c');
  throwsTyped(() => pool.unregister('proxy', 'a'), LeasedError, { code: 'leased', live: 1 });

  pool.block('proxy', 'a', { reason: 'abuse' });
  await assert.rejects(lease.renew(), (e) => e instanceof BlockedError && e.code === 'blocked');
  assert.equal(pool.unblock('proxy', 'a'), true);

  const other = pool.tryAcquire('c') ?? assert.fail('the second permit is free');
  pool.restore(empty);
  await rejectsTyped(other.renew(), UnknownLeaseError, { code: 'unknown_lease' });
});

test('InvalidSnapshotError leaves the pool as it was', () => {
  const { pool } = memoryPool();
  pool.register('proxy', 'a');
  throwsTyped(() => pool.restore(Buffer.from('not a snapshot at all')), InvalidSnapshotError, {
    code: 'invalid_snapshot',
    reason: 'foreign',
    field: null,
    rule: null,
  });
  const bytes = pool.snapshot();
  bytes[bytes.length - 1] ^= 0xff;
  throwsTyped(() => pool.restore(bytes), InvalidSnapshotError, { reason: 'checksum' });
  assert.deepEqual(
    pool.resources().map((r) => r.value),
    ['a'],
  );
});

test('a closed pool refuses calls', () => {
  const { pool } = memoryPool();
  pool.close();
  pool.close();
  throwsTyped(() => pool.stats(), PoolClosedError, { code: 'closed', message: 'pool is closed' });
});
