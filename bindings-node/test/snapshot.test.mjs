// Snapshots: a Buffer that restores the same state into another pool.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { Pool, ManualClock } from 'repute';

test('snapshot and restore carry resources, reputation and leases', async () => {
  const clock = new ManualClock();
  const a = new Pool({ clock, strategy: 'first', seed: 9 });
  a.register('proxy', 'a', { permits: 2 });
  a.register('proxy', 'b');
  await a.reportSuccess('proxy', 'a', 'shop', { latencyMs: 20 });
  await a.reportFailure('proxy', 'b', 'shop', 'slow', { latencyMs: 900 });
  a.block('proxy', 'b', { context: 'bank', reason: 'captcha' });
  const lease = a.tryAcquire('shop');

  const bytes = a.snapshot();
  assert.ok(Buffer.isBuffer(bytes));
  assert.equal(bytes.subarray(0, 8).toString('latin1'), 'RPUTSNAP');

  const b = new Pool({ clock: new ManualClock(), strategy: 'first' });
  b.restore(bytes);
  assert.deepEqual(b.resources(), a.resources());
  for (const value of ['a', 'b']) {
    assert.deepEqual(
      b.cells('proxy', value).map(({ coolingUntilMs, ...rest }) => rest),
      a.cells('proxy', value).map(({ coolingUntilMs, ...rest }) => rest),
    );
  }
  const [restored] = b.leases();
  assert.equal(restored.token, lease.token);
  assert.equal(restored.id, lease.id);
  assert.equal(restored.expiresAtMs - b.now(), 30_000, 'a restored lease gets its full TTL');

  // Fencing continues past the snapshot.
  const next = b.tryAcquire('shop');
  assert.equal(next.value, 'a');
  assert.equal(next.permit, 1);

  // Without leases, and through JSON.
  const c = new Pool();
  c.restoreJson(a.snapshotJson({ withLeases: false }));
  assert.deepEqual(c.leases(), []);
  assert.deepEqual(c.resources().map((r) => [r.value, r.leased]), [
    ['a', 0],
    ['b', 0],
  ]);
  for (const p of [a, b, c]) p.close();
});
