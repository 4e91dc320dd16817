// A resource's secret: registered with it, handed to the holders of its
// leases (`lease.secret`), and shown nowhere else: no event, view,
// inspection, toJSON, console line, error or JSON snapshot carries it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { inspect } from 'node:util';

import { Pool, ManualClock, BlockedError } from 'repute';

const SECRET = 'sk-live-7f3a9c1e5b';

function fixture() {
  return new Pool({ clock: new ManualClock(), strategy: 'first' });
}

test("a lease hands out its resource's secret", async () => {
  const pool = fixture();
  pool.register('api-key', 'k1', { secret: SECRET, labels: { tier: 'paid' } });
  pool.register('api-key', 'k2');
  const lease = pool.tryAcquire('c');
  assert.deepEqual([lease.value, lease.secret, lease.secret], ['k1', SECRET, SECRET]);
  await lease.release();
  const other = await pool.acquire('c', { exclude: ['k1'] });
  assert.deepEqual([other.value, other.secret], ['k2', null]);
  await other.release();
  assert.equal(pool.register('api-key', 'k1', { secret: 'sk-rotated', labels: { tier: 'paid' } }), true);
  assert.equal(await pool.withLease('c', async (l) => l.secret), 'sk-rotated');
  assert.equal(pool.register('api-key', 'k1'), true);
  assert.equal(await pool.withLease('c', async (l) => l.secret), null, 'registering again without one removes it');
  pool.close();
});

test('a lease keeps the secret it was granted with', () => {
  const pool = fixture();
  pool.register('api-key', 'k1', { secret: SECRET });
  const lease = pool.tryAcquire('c');
  assert.equal(pool.register('api-key', 'k1', { secret: 'sk-rotated' }), true);
  assert.equal(lease.secret, SECRET, 'the grant brought it: a rotation is for the next lease');
  pool.unregister('api-key', 'k1', { force: true });
  assert.equal(lease.secret, SECRET, 'its resource gone, the lease still holds it');
  pool.close();
});

test('snapshots keep the secret in binary and leave it out of JSON', () => {
  const pool = fixture();
  pool.register('api-key', 'k1', { secret: SECRET, labels: { tier: 'paid' } });
  const json = pool.snapshotJson();
  assert.ok(!JSON.stringify(json).includes(SECRET));
  const bytes = pool.snapshot();
  pool.close();

  const fromBinary = fixture();
  fromBinary.restore(bytes);
  assert.equal(fromBinary.tryAcquire('c').secret, SECRET);
  assert.deepEqual(fromBinary.resources().map((r) => r.labels), [{ tier: 'paid' }]);
  fromBinary.close();

  const fromJson = fixture();
  fromJson.restoreJson(json);
  assert.equal(fromJson.tryAcquire('c').secret, null, 'a JSON snapshot carries no secret');
  assert.deepEqual(fromJson.resources().map((r) => r.labels), [{ tier: 'paid' }]);
  fromJson.close();
});

/** Everything `fn` writes to the console and the process's streams while it runs. */
async function capturingOutput(fn) {
  const lines = [];
  const saved = { out: process.stdout.write, err: process.stderr.write };
  const methods = ['log', 'info', 'warn', 'error', 'debug', 'trace'];
  const console0 = Object.fromEntries(methods.map((m) => [m, console[m]]));
  process.stdout.write = (chunk, ...rest) => (lines.push(String(chunk)), saved.out.call(process.stdout, chunk, ...rest));
  process.stderr.write = (chunk, ...rest) => (lines.push(String(chunk)), saved.err.call(process.stderr, chunk, ...rest));
  for (const m of methods) console[m] = (...args) => lines.push(args.map((a) => inspect(a)).join(' '));
  try {
    await fn();
  } finally {
    process.stdout.write = saved.out;
    process.stderr.write = saved.err;
    Object.assign(console, console0);
  }
  return lines;
}

test('the secret is in no event, view, inspection, error or output line', async () => {
  const pool = fixture();
  const seen = [];
  const show = (v) => seen.push(inspect(v, { depth: 8, showHidden: true, getters: false }), JSON.stringify(v, (_, x) => (typeof x === 'bigint' ? String(x) : x)));
  const events = [];
  const iterator = pool.events();
  const output = await capturingOutput(async () => {
    pool.register('api-key', 'k1', { secret: SECRET, labels: { tier: 'paid' } });
    const lease = await pool.acquire('c', { affinity: 'user-1', autoRenew: true });
    assert.equal(lease.secret, SECRET);
    show(lease);
    show(lease.toJSON());
    await lease.renew();
    const errors = [
      () => pool.unregister('api-key', 'k1'),
      () => pool.register('api-key', 'k1', { permits: 0, secret: SECRET }),
      () => pool.register('api-key', 'k1', { labels: { tier: `${SECRET}\n` } }),
      () => pool.register('api-key', 'k1', { secret: SECRET.repeat(300) }),
      () => pool.tryAcquire('c', { where: { tier: [`${SECRET}\n`] } }),
    ];
    for (const f of errors) {
      assert.throws(f, (e) => (show(e), seen.push(e.message, String(e.stack)), true));
    }
    await assert.rejects(pool.acquire('c', { timeoutMs: 0 }), (e) => (show(e), seen.push(e.message), true));
    await lease.reportHttp(429, { headers: { 'Retry-After': '30' } });
    pool.block('api-key', 'k1', { durationMs: 60_000, reason: 'rotated' });
    await assert.rejects(lease.renew(), (e) => e instanceof BlockedError && (show(e), seen.push(e.message), true));
    await lease.release();
    pool.unblock('api-key', 'k1');
    for (const v of [...pool.resources(), ...pool.cells('api-key', 'k1'), pool.stats(), ...pool.leases()]) show(v);
    show(pool.snapshotJson());
    show(pool.snapshotJson({ withLeases: false }));
    pool.close();
    for await (const e of iterator) events.push(e);
  });
  for (const e of events) show(e);
  assert.ok(events.some((e) => e.type === 'leased') && events.some((e) => e.type === 'blocklisted'));
  assert.ok(seen.some((s) => s.includes('paid')), 'the views were looked at');
  for (const text of [...seen, ...output]) assert.ok(!text.includes(SECRET), text);
});
