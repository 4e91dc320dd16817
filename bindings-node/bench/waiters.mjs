// CPU per grant when many acquires wait for few permits.
//
//   node bench/waiters.mjs [permits=4] [waiters=4,100,400] [rounds=20]
//
// Each of `waiters` acquires holds its lease a millisecond and releases,
// `rounds` times, over `permits` resources of one permit each. A release
// wakes the longest-waiting acquire alone (lib/line.js), so the CPU a grant
// costs should not grow with the number waiting; the ratio to the first row
// (as many waiters as permits) says how far it does.
import { Pool } from '../index.js';

const permits = Number(process.argv[2] ?? 4);
const counts = (process.argv[3] ?? '4,100,400').split(',').map(Number);
const rounds = Number(process.argv[4] ?? 20);
const pause = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function contend(waiters) {
  const pool = new Pool();
  for (let i = 0; i < permits; i++) pool.register('proxy', `p${i}`);
  const start = process.cpuUsage();
  await Promise.all(
    Array.from({ length: waiters }, async () => {
      for (let r = 0; r < rounds; r++) {
        const lease = await pool.acquire('example.com', { timeoutMs: 120_000 });
        await pause(1);
        lease.release();
      }
    }),
  );
  const used = process.cpuUsage(start);
  pool.close();
  return (used.user + used.system) / 1e6 / (waiters * rounds);
}

let base;
console.log(`${'waiters'.padStart(8)} ${'cpu/grant'.padStart(12)} ${'ratio'.padStart(7)}`);
for (const waiters of counts) {
  const perGrant = await contend(waiters);
  base ??= perGrant;
  console.log(`${String(waiters).padStart(8)} ${(perGrant * 1e6).toFixed(1).padStart(9)} µs ${(perGrant / base).toFixed(2).padStart(6)}×`);
}
