// repute on Redis against the semaphore a Node user would otherwise pick, on
// the same server in one run: acquire + release of a repute lease (shared
// mode: one grant script sent on the pool's own connection from the event
// loop, or run by `tryAcquire` waiting on the JS thread; one revoke script
// on release, awaited) vs acquire + release of a
// redis-semaphore `Mutex` on ioredis, one client, round trip bound. repute
// also picks the resource (100 registered, reputation-weighted) and mints a
// fencing token; the mutex only excludes. Each row also gives this
// process's CPU time and the server's command time (INFO commandstats,
// which includes the bench's own two INFO calls) per pair.
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

const admin = new Redis(url);

/** Microseconds the server has spent running commands (INFO commandstats). */
async function serverUsec() {
  const stats = await admin.info('commandstats');
  return [...stats.matchAll(/usec=(\d+)/g)].reduce((sum, m) => sum + Number(m[1]), 0);
}

/**
 * Runs `pairs` awaited pairs of `pair()`: wall time, this process's CPU time
 * and the server's command time per pair, in ns.
 */
async function timed(pair) {
  const server = await serverUsec();
  const cpu = process.cpuUsage();
  const start = process.hrtime.bigint();
  for (let i = 0; i < pairs; i++) await pair(i);
  const wall = Number(process.hrtime.bigint() - start) / pairs;
  const used = process.cpuUsage(cpu);
  return {
    wall,
    cpu: ((used.user + used.system) * 1000) / pairs,
    server: ((await serverUsec()) - server) * 1000 / pairs,
  };
}

async function reputePairs(blocking) {
  const pool = await Pool.open({ store: url, tenant: `bench-${randomUUID()}`, mode: 'shared' });
  for (let i = 0; i < 100; i++) pool.register('proxy', `10.0.0.${i}:8080`);
  const result = await timed(async () => {
    const lease = blocking ? pool.tryAcquire('example.com') : await pool.acquire('example.com', { timeoutMs: 0 });
    await lease.release();
  });
  pool.close();
  return result;
}

async function mutexPairs() {
  const client = new Redis(url);
  const names = Array.from({ length: 100 }, (_, i) => `bench-${randomUUID()}-${i}`);
  const result = await timed(async (i) => {
    const mutex = new Mutex(client, names[i % 100], { lockTimeout: 30_000, acquireTimeout: 1_000 });
    await mutex.acquire();
    await mutex.release();
  });
  client.disconnect();
  return result;
}

/** The best run (by wall time) of each. */
const best = (a, b) => (b.wall < a.wall ? b : a);
let ours = { wall: Infinity };
let oursBlocking = { wall: Infinity };
let theirs = { wall: Infinity };
for (let r = 0; r < runs; r++) {
  ours = best(ours, await reputePairs(false));
  oursBlocking = best(oursBlocking, await reputePairs(true));
  theirs = best(theirs, await mutexPairs());
}
const us = (ns) => (ns / 1000).toFixed(1);
const row = (name, { wall, cpu, server }) =>
  console.log(
    `${name} ${us(wall)} us/pair = ${(1e9 / wall).toFixed(0)} pairs/s (client CPU ${us(cpu)}, server ${us(server)} us/pair)`,
  );
row('repute await acquire() + release():   ', ours);
row('repute tryAcquire() + release():      ', oursBlocking);
row('redis-semaphore Mutex acquire+release:', theirs);
const ratio = (a) => (theirs.wall / a.wall).toFixed(2);
console.log(`repute / redis-semaphore throughput: ${ratio(ours)}x (acquire), ${ratio(oursBlocking)}x (tryAcquire)`);
admin.disconnect();
