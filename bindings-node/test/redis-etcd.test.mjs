// Redis shared mode and etcd owner leases from Node: the same `store`,
// `mode` and `owners` options the server takes.
//
// Needs the servers of `scripts/services.sh start` (REPUTE_TEST_REDIS_URL,
// REPUTE_TEST_ETCD_URL, REPUTE_TEST_PG_URL); without them these tests fail,
// never skip. Every test uses a tenant of its own.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';

import { Pool, NotOwnerError, InvalidInputError } from 'repute';

function env(name) {
  const value = process.env[name];
  assert.ok(value, `${name} is not set: run \`scripts/services.sh start\` and \`export $(scripts/services.sh env)\``);
  return value;
}

const newTenant = () => `node-${randomUUID()}`;

test('redis shared: two pools never hold one permit together', async () => {
  const store = env('REPUTE_TEST_REDIS_URL');
  const tenant = newTenant();
  const a = await Pool.open({ store, tenant, mode: 'shared' });
  const b = await Pool.open({ store, tenant, mode: 'shared' });
  try {
    a.register('proxy', 'only');
    assert.equal(b.sync(), 1);
    const held = await a.acquire('shop', { timeoutMs: 0 });
    assert.equal(b.tryAcquire('shop'), null);
    held.release();
    const taken = await b.acquire('shop', { timeoutMs: 0 });
    assert.equal(taken.token, held.token + 1n);
    taken.release();
  } finally {
    a.close();
    b.close();
  }
});

test('etcd owners: a second pool is refused naming the first, then takes over after it resigns', async () => {
  const store = env('REPUTE_TEST_PG_URL');
  const owners = `etcd://${env('REPUTE_TEST_ETCD_URL').replace(/^http:\/\//, '')}`;
  const tenant = newTenant();
  const first = await Pool.open({ store, tenant, owners, ownerTtlMs: 2_000 });
  first.register('proxy', 'a');
  await assert.rejects(
    Pool.open({ store, tenant, owners, ownerTtlMs: 2_000 }),
    (e) => e instanceof NotOwnerError && e.owner === `embedded pid ${process.pid}`,
  );
  first.close();
  const second = await Pool.open({ store, tenant, owners, ownerTtlMs: 2_000 });
  assert.deepEqual(
    second.resources().map((r) => r.value),
    ['a'],
  );
  second.close();
});

test('a bad owners value names the field', () => {
  assert.throws(
    () => new Pool({ store: 'memory', owners: 'zookeeper://x:1' }),
    (e) => e instanceof InvalidInputError && e.field === 'owners',
  );
});
