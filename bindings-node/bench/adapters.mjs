// The undici dispatcher's overhead per request: `undici.request` through a
// ReputeDispatcher (embedded memory pool, one API key, its credential header
// set) against the bare undici Agent, both on the same local HTTP server,
// one request at a time, alternating; then the process's CPU time per
// request of each, and the protocol's native calls timed one by one.
// Goal: <= 50 us more per request at the median.
//
// Usage: node bench/adapters.mjs [requests=5000]
import { createServer } from 'node:http';
import { createRequire } from 'node:module';
import { Agent, request } from 'undici';
import { Pool, dispatcher } from 'repute';

const native = createRequire(import.meta.url)('../repute.node');

const n = Number(process.argv[2] ?? 5_000);
const server = createServer((req, res) => res.writeHead(200, { 'content-type': 'text/plain' }).end('ok'));
await new Promise((ok) => server.listen(0, '127.0.0.1', ok));
const url = `http://127.0.0.1:${server.address().port}/v1/models`;

const pool = new Pool({ seed: 1 });
pool.register('api-key', 'k1', { permits: 4, secret: 'sk-bench' });
const carrier = dispatcher(pool, { kind: 'api-key', context: 'bench' });
const bare = new Agent();

/** One request's wall time (us) through `d`. */
async function once(d) {
  const start = process.hrtime.bigint();
  const res = await request(url, { dispatcher: d, headers: { authorization: 'Bearer placeholder' } });
  await res.body.text();
  return Number(process.hrtime.bigint() - start) / 1e3;
}

/** The process's CPU time (us) per request of `count` through `d`: time spent waiting for a core left out. */
async function cpu(d, count) {
  const before = process.cpuUsage();
  for (let i = 0; i < count; i++) await once(d);
  const used = process.cpuUsage(before);
  return (used.user + used.system) / count;
}

// Alternating, so the load of a shared machine falls on both alike.
const b = [];
const r = [];
for (let i = 0; i < 500; i++) await once(bare), await once(carrier); // warm up both paths
for (let i = 0; i < n; i++) {
  b.push(await once(bare));
  r.push(await once(carrier));
}
const cpuBare = await cpu(bare, n / 5);
const cpuCarrier = await cpu(carrier, n / 5);
pool.drainEvents();

// The protocol's native calls as the dispatcher makes them between real
// requests (where the socket and undici have evicted the caches they use),
// each timed on its own: where the overhead goes.
const calls = {};
const timing = (proto, name) => {
  const call = proto[name];
  proto[name] = function (...args) {
    const start = process.hrtime.bigint();
    try {
      return call.apply(this, args);
    } finally {
      (calls[name] ??= []).push(Number(process.hrtime.bigint() - start) / 1e3);
    }
  };
};
timing(native.NativePlan.prototype, 'start');
for (const name of ['nextNow', 'answered', 'finished', 'end']) timing(native.NativeAttempts.prototype, name);
for (let i = 0; i < n; i++) await once(carrier);
b.sort((x, y) => x - y);
r.sort((x, y) => x - y);
const at = (sorted, q) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
const us = (x) => Math.round(x * 10) / 10;
console.log(
  JSON.stringify({
    requests: n,
    bare: { medianUs: us(at(b, 0.5)), p99Us: us(at(b, 0.99)), cpuUs: us(cpuBare) },
    dispatcher: { medianUs: us(at(r, 0.5)), p99Us: us(at(r, 0.99)), cpuUs: us(cpuCarrier) },
    overheadMedianUs: us(at(r, 0.5) - at(b, 0.5)),
    overheadP99Us: us(at(r, 0.99) - at(b, 0.99)),
    overheadCpuUs: us(cpuCarrier - cpuBare),
    callsMedianUs: Object.fromEntries(Object.entries(calls).map(([k, v]) => [k, us(at(v.sort((x, y) => x - y), 0.5))])),
  }),
);
await carrier.close();
await bare.close();
server.close();
