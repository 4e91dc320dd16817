// acquire + release pairs per second through the public JavaScript API,
// embedded memory store, system clock: `tryAcquire(context)` then
// `lease.release()`. Goal: <= 3 us per pair.
//
// Usage: node bench/acquire.mjs [resources=1000] [pairs=200000]
import { Pool } from 'repute';

const resources = Number(process.argv[2] ?? 1_000);
const pairs = Number(process.argv[3] ?? 200_000);
const contexts = Array.from({ length: 10 }, (_, i) => `site-${i}.example`);

const pool = new Pool({ seed: 1 });
for (let i = 0; i < resources; i++) pool.register('proxy', `10.0.${i >> 8}.${i & 255}:8080`);
// Three observations per resource, as in the core benchmark.
for (let i = 0; i < resources; i++) {
  for (let j = 0; j < 3; j++) {
    await pool.reportSuccess('proxy', `10.0.${i >> 8}.${i & 255}:8080`, contexts[(i + j) % 10], { latencyMs: 50 });
  }
}

// Wall time, and this process's CPU time: on a shared machine the second
// excludes time spent waiting for a core.
function run(n) {
  const cpu = process.cpuUsage();
  const start = process.hrtime.bigint();
  for (let i = 0; i < n; i++) {
    const lease = pool.tryAcquire(contexts[i % 10]);
    lease.release();
  }
  const wall = Number(process.hrtime.bigint() - start) / n;
  const used = process.cpuUsage(cpu);
  return { wall, cpu: ((used.user + used.system) * 1000) / n };
}

run(Math.min(pairs, 20_000)); // warm up the JIT and the component
pool.drainEvents();
const { wall, cpu } = run(pairs);
const result = {
  resources,
  pairs,
  usPerPair: Number((wall / 1000).toFixed(3)),
  cpuUsPerPair: Number((cpu / 1000).toFixed(3)),
  pairsPerSecond: Math.round(1e9 / wall),
  node: process.version,
};
console.log(JSON.stringify(result));
pool.close();
