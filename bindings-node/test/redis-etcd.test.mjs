// Redis shared mode and etcd owner leases from Node: the same `store`,
// `mode` and `owners` options the server takes.
//
// Needs the servers of `scripts/services.sh start` (REPUTE_TEST_REDIS_URL,
// REPUTE_TEST_ETCD_URL, REPUTE_TEST_PG_URL); without them these tests fail,
// never skip. Every test uses a tenant of its own.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import net from 'node:net';

import { Pool, NotOwnerError, InvalidInputError, NoResourceAvailableError, StoreError } from 'repute';

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
    await held.release();
    const taken = await b.acquire('shop', { timeoutMs: 0 });
    assert.equal(taken.token, held.token + 1n);
    await taken.release();
  } finally {
    a.close();
    b.close();
  }
});

test('redis shared: an acquire on the connection judged on a stale view folds and grants within new group limits', async () => {
  const store = env('REPUTE_TEST_REDIS_URL');
  const tenant = newTenant();
  const lagging = await Pool.open({ store, tenant, mode: 'shared' });
  const other = await Pool.open({ store, tenant, mode: 'shared' });
  try {
    for (const key of ['k1', 'k2', 'k3']) lagging.register('api-key', key, { groups: ['g'] });
    assert.equal(other.sync(), 3);
    assert.ok(other.setGroup('g', { rpm: 2 }));
    // The lagging pool never syncs: Redis refuses its first grant as stale,
    // and its next proposal is made after folding the new limits.
    let granted = 0;
    for (let i = 0; i < 6; i += 1) {
      try {
        const lease = await lagging.acquire('chat', { timeoutMs: 0 });
        granted += 1;
        await lease.release();
      } catch (e) {
        assert.ok(e instanceof NoResourceAvailableError, String(e));
      }
    }
    assert.equal(granted, 2, "g's rpm of 2, set at the other pool");
    assert.equal(lagging.groups()[0].limits.rpm, 2);
  } finally {
    lagging.close();
    other.close();
  }
});

test('redis shared: acquires on the connection choose by selector and hand out a secret registered elsewhere', async () => {
  const store = env('REPUTE_TEST_REDIS_URL');
  const tenant = newTenant();
  const other = await Pool.open({ store, tenant, mode: 'shared' });
  const pool = await Pool.open({ store, tenant, mode: 'shared' });
  try {
    other.register('api-key', 'k1', { labels: { tier: 'free' }, secret: 'sk-1' });
    other.register('api-key', 'k2', { labels: { tier: 'paid' }, secret: 'sk-2' });
    other.register('proxy', 'p1', { labels: { tier: 'paid' } });
    assert.equal(pool.sync(), 3);
    const lease = await pool.acquire('c', { timeoutMs: 0, kind: 'api-key', where: { tier: 'paid' }, affinity: 'user-1' });
    assert.deepEqual([lease.value, lease.secret], ['k2', 'sk-2']);
    assert.equal(other.tryAcquire('c', { kind: 'api-key', where: { tier: 'paid' } }), null, 'Redis holds it');
    await lease.release();
    const again = await pool.acquire('c', { timeoutMs: 0, affinity: 'user-1' });
    assert.equal(again.value, 'k2');
    await again.release();
    await assert.rejects(
      pool.acquire('c', { timeoutMs: 0, where: { tier: [] } }),
      (e) => e instanceof InvalidInputError && e.field === 'where' && e.rule === 'each filter must list 1..=16 values',
    );
  } finally {
    pool.close();
    other.close();
  }
});

test('redis shared: the store counts a key\'s limits across pools, acquires on the connection too', async () => {
  const store = env('REPUTE_TEST_REDIS_URL');
  const tenant = newTenant();
  const other = await Pool.open({ store, tenant, mode: 'shared' });
  const pool = await Pool.open({ store, tenant, mode: 'shared' });
  try {
    other.register('api-key', 'k1', { limits: { tpm: 100 } });
    assert.equal(pool.sync(), 1);
    assert.deepEqual(pool.resources()[0].limits, { tpm: 100 });
    await assert.rejects(
      pool.acquire('gpt-4o', { timeoutMs: 0, cost: 101 }),
      (e) => e instanceof NoResourceAvailableError && e.noneRegistered,
      "the cost went with the acquire: above the key's tpm",
    );
    await pool.withLease('gpt-4o', (lease) => lease.reportSuccess({ usage: 30 }), { timeoutMs: 0, cost: 60 });
    // 30 + 70 tokens: Redis counts what the first grant used, not its cost.
    await (await other.acquire('gpt-4o', { timeoutMs: 0, cost: 70 })).release();
    await assert.rejects(pool.acquire('gpt-4o', { timeoutMs: 0 }), (e) => {
      assert.ok(e instanceof NoResourceAvailableError, String(e));
      assert.equal(e.limited, 1, '100 tokens a minute, of both pools');
      assert.ok(e.retryAfterMs > 50_000 && e.retryAfterMs <= 60_000, String(e.retryAfterMs));
      return true;
    });
  } finally {
    pool.close();
    other.close();
  }
});

/** Sends one command to the Redis at `url` on a connection of its own; resolves with the reply line. */
function redisCommand(url, ...args) {
  const { hostname, port } = new URL(url);
  const wire = `*${args.length}\r\n${args.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join('')}`;
  return new Promise((resolve, reject) => {
    const socket = net.createConnection({ host: hostname, port: Number(port) }, () => socket.write(wire));
    socket.once('data', (reply) => {
      socket.end();
      resolve(reply.toString().trimEnd());
    });
    socket.once('error', reject);
  });
}

test('redis shared: acquires in flight together on one connection get distinct permits, in any order', async () => {
  const store = env('REPUTE_TEST_REDIS_URL');
  const tenant = newTenant();
  // `first` would propose one resource to every acquire if the ones in
  // flight were not set aside.
  const pool = await Pool.open({ store, tenant, mode: 'shared', strategy: 'first' });
  const other = await Pool.open({ store, tenant, mode: 'shared' });
  try {
    for (let i = 0; i < 8; i++) pool.register('proxy', `p${i}`);
    const leases = await Promise.all(Array.from({ length: 8 }, () => pool.acquire('shop', { timeoutMs: 0 })));
    assert.deepEqual(leases.map((l) => l.value).sort(), ['p0', 'p1', 'p2', 'p3', 'p4', 'p5', 'p6', 'p7']);
    assert.ok(leases.every((l) => l.token === 1n && l.valid));
    other.sync();
    assert.equal(other.tryAcquire('shop'), null, 'every permit is held at Redis');
    await Promise.all(leases.map((l) => l.release()));
    assert.equal((await other.acquire('shop', { timeoutMs: 0 })).token, 2n);
  } finally {
    pool.close();
    other.close();
  }
});

test('redis shared: an acquire waits for Redis on the event loop, not on the JS thread', async () => {
  const store = env('REPUTE_TEST_REDIS_URL');
  const pool = await Pool.open({ store, tenant: newTenant(), mode: 'shared' });
  try {
    pool.register('proxy', 'a');
    let ranMeanwhile = false;
    setImmediate(() => {
      ranMeanwhile = true;
    });
    const pending = pool.acquire('shop', { timeoutMs: 0 });
    assert.equal(ranMeanwhile, false);
    const lease = await pending;
    assert.equal(ranMeanwhile, true, 'the loop turned while the grant was on its way');
    await lease.release();
  } finally {
    pool.close();
  }
});

test('redis shared: scripts the server lost are sent again as source', async () => {
  const store = env('REPUTE_TEST_REDIS_URL');
  const pool = await Pool.open({ store, tenant: newTenant(), mode: 'shared' });
  try {
    pool.register('proxy', 'a');
    assert.equal(await redisCommand(store, 'SCRIPT', 'FLUSH'), '+OK');
    const lease = await pool.acquire('shop', { timeoutMs: 0 });
    assert.equal(await redisCommand(store, 'SCRIPT', 'FLUSH'), '+OK');
    await lease.release();
    assert.equal((await pool.acquire('shop', { timeoutMs: 0 })).token, lease.token + 1n);
  } finally {
    pool.close();
  }
});

test('redis shared: a pool left open does not keep the process alive once no reply is due', () => {
  const program = `
    const { Pool } = require(${JSON.stringify(new URL('../index.js', import.meta.url).pathname)});
    (async () => {
      const pool = await Pool.open({ store: process.env.REPUTE_TEST_REDIS_URL, tenant: ${JSON.stringify(newTenant())}, mode: 'shared' });
      pool.register('proxy', 'a');
      const lease = await pool.acquire('shop', { timeoutMs: 0 });
      await lease.release();
      console.log('token', String(lease.token));
    })();
  `;
  const run = spawnSync(process.execPath, ['-e', program], { encoding: 'utf8', timeout: 20_000 });
  assert.equal(run.status, 0, run.stderr);
  assert.equal(run.stdout.trim(), 'token 1');
});

/** A free loopback port (released before the caller binds it). */
async function freePort() {
  const server = net.createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address();
  server.close();
  await once(server, 'close');
  return port;
}

/** A throwaway Redis on `port`, answering once it accepts connections. */
async function startRedis(port) {
  const server = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
    stdio: 'ignore',
  });
  for (let i = 0; i < 200; i++) {
    if ((await redisCommand(`redis://127.0.0.1:${port}`, 'PING').catch(() => '')) === '+PONG') return server;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  server.kill('SIGKILL');
  throw new Error(`redis-server on port ${port} did not come up`);
}

test('redis shared: a server that goes away fails what is in flight, and the pool reconnects when it is back', async () => {
  const port = await freePort();
  let server = await startRedis(port);
  const store = `redis://127.0.0.1:${port}`;
  const leaseTtlMs = 400;
  const pool = await Pool.open({ store, tenant: newTenant(), mode: 'shared', strategy: 'first', leaseTtlMs });
  try {
    pool.register('proxy', 'a');
    pool.register('proxy', 'b');
    const held = await pool.acquire('shop', { timeoutMs: 0 });
    assert.equal(held.value, 'a');
    server.kill('SIGKILL');
    await once(server, 'exit');
    await assert.rejects(pool.acquire('shop', { timeoutMs: 0 }), StoreError, 'the grant for b had no server');
    await assert.rejects(held.release(), StoreError, 'nor had the revoke for a');
    assert.equal(held.valid, false);
    server = await startRedis(port);
    // The server lost everything, the pool did not: the leases the server
    // may have granted are waited out, and tokens start above its clock.
    const restarted = BigInt(Date.now()) * 1000n;
    let waited = 0;
    await assert.rejects(pool.acquire('shop', { timeoutMs: 0 }), (e) => {
      waited = e.retryAfterMs;
      return e instanceof StoreError && e.code === 'store_recovering' && waited > 0 && waited <= leaseTtlMs;
    });
    await new Promise((resolve) => setTimeout(resolve, waited + 5));
    const again = await pool.acquire('shop', { timeoutMs: 0 });
    assert.equal(again.value, 'a');
    assert.ok(again.token > restarted, `${again.token} above the clock at the restart`);
    await again.release();
  } finally {
    pool.close();
    server.kill('SIGKILL');
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
