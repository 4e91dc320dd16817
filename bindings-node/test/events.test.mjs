// pool.events(): an async iterator fed by pool calls.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { Pool, ManualClock } from 'repute';

test('events arrive in order, wait for the next call, and end on close', async () => {
  const clock = new ManualClock();
  const pool = new Pool({ clock, strategy: 'first', leaseTtlMs: 1_000 });
  pool.register('proxy', 'a'); // before subscribing: still pending, so delivered
  const events = pool.events();

  const lease = pool.tryAcquire('shop');
  lease.release();
  for (let i = 0; i < 3; i++) await pool.reportFailure('proxy', 'a', 'shop', 'blocked');

  const seen = [];
  for await (const e of events) {
    seen.push(e);
    if (seen.length === 4) break;
  }
  assert.deepEqual(
    seen.map((e) => e.type),
    ['registered', 'leased', 'released', 'cooled'],
  );
  assert.deepEqual(
    { kind: seen[0].kind, value: seen[0].value, permits: seen[0].permits, atMs: seen[0].atMs },
    { kind: 'proxy', value: 'a', permits: 1, atMs: 0 },
  );
  assert.equal(seen[1].lease.token, 1n);
  assert.equal(seen[1].context, 'shop');
  assert.equal(seen[3].cause, 'blocked');
  assert.equal(seen[3].untilMs, 300_000, 'a ban cools at its first report, for 300 s outside the classic recovery');

  // A pending next() resolves when a later call produces an event.
  const live = pool.events();
  const pending = live.next();
  pool.register('proxy', 'b');
  assert.deepEqual((await pending).value.type, 'registered');

  // Expiry is fired by the next call after the clock passes it.
  pool.tryAcquire('other');
  const afterGrant = await live.next();
  assert.equal(afterGrant.value.type, 'leased');
  clock.advance(1_000);
  pool.stats();
  const expired = await live.next();
  assert.equal(expired.value.type, 'lease_expired');
  assert.equal(expired.value.atMs, 1_000);

  const ending = live.next();
  pool.close();
  assert.deepEqual(await ending, { value: undefined, done: true });
});
