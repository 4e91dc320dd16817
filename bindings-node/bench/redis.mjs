// repute on Redis against the semaphore a Node user would otherwise pick, on
// the same server in one run: acquire + release of a repute lease (shared
// mode: one grant script sent on the pool's own connection from the event
// loop, or run by `tryAcquire` waiting on the JS thread; one revoke script
// on release, awaited) vs acquire + release of a
// redis-semaphore `Mutex` on ioredis, one client, round trip bound. repute
// also picks the resource (100 registered, reputation-weighted) and mints a
// fencing token; the mutex only excludes.
//
// Usage (the two packages are not dependencies of repute):
//   npm install --no-save redis-semaphore ioredis
//   node bench/redis.mjs [url=redis://127.0.0.1:56379] [pairs=3000] [runs=3]
import { randomUUID } from 'node:crypto';

import Redis from 'ioredis';
import { Mutex } from 'redis-semaphore';
import { Pool } from 'repute';

const url = process.argv[2] ?? process.env.REPUTE_TEST_REDIS_URL ?? 'redis://127.0.0.1:56379';
const pairs = Number(process.argv[3] ?? 3_000);
const runs = Number(process.argv[4] ?? 3);

async function reputePairs(blocking) {
  const pool = await Pool.open({ store: url, tenant: `bench-${randomUUID()}`, mode: 'shared' });
  for (let i = 0; i < 100; i++) pool.register('proxy', `10.0.0.${i}:8080`);
  const start = process.hrtime.bigint();
  for (let i = 0; i < pairs; i++) {
    const lease = blocking ? pool.tryAcquire('example.com') : await pool.acquire('example.com', { timeoutMs: 0 });
    await lease.release();
  }
  const perPair = Number(process.hrtime.bigint() - start) / pairs;
  pool.close();
  return perPair;
}

async function mutexPairs() {
  const client = new Redis(url);
  const names = Array.from({ length: 100 }, (_, i) => `bench-${randomUUID()}-${i}`);
  const start = process.hrtime.bigint();
  for (let i = 0; i < pairs; i++) {
    const mutex = new Mutex(client, names[i % 100], { lockTimeout: 30_000, acquireTimeout: 1_000 });
    await mutex.acquire();
    await mutex.release();
  }
  const perPair = Number(process.hrtime.bigint() - start) / pairs;
  client.disconnect();
  return perPair;
}

let ours = Infinity;
let oursBlocking = Infinity;
let theirs = Infinity;
for (let r = 0; r < runs; r++) {
  ours = Math.min(ours, await reputePairs(false));
  oursBlocking = Math.min(oursBlocking, await reputePairs(true));
  theirs = Math.min(theirs, await mutexPairs());
}
const row = (name, ns) => console.log(`${name} ${(ns / 1000).toFixed(1)} us/pair = ${(1e9 / ns).toFixed(0)} pairs/s`);
row('repute await acquire() + release():   ', ours);
row('repute tryAcquire() + release():      ', oursBlocking);
row('redis-semaphore Mutex acquire+release:', theirs);
console.log(`repute / redis-semaphore throughput: ${(theirs / ours).toFixed(2)}x (acquire), ${(theirs / oursBlocking).toFixed(2)}x (tryAcquire)`);
