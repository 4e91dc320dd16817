// Every instant a person reads (events, cells, blocks, leases) has its Unix
// time beside it, in ms, mapped from the pool's clock when the view is made.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { Pool, ManualClock } from 'repute';

test('instants have their Unix time in ms beside them', () => {
  const clock = new ManualClock();
  const pool = new Pool({ clock, strategy: 'first', leaseTtlMs: 30_000 });
  pool.register('proxy', 'a');
  pool.register('proxy', 'b');
  clock.advance(5_000);
  const lease = pool.tryAcquire('shop');
  pool.block('proxy', 'b', { durationMs: 60_000 });
  for (let i = 0; i < 3; i++) pool.reportFailure('proxy', 'a', 'shop', 'timeout', { latencyMs: 1000 });

  /** `unix` is the Unix time (ms) of pool-clock instant `at`, read now. */
  const near = (unix, at) => {
    assert.equal(typeof unix, 'number');
    assert.ok(Math.abs(unix - (Date.now() + at - pool.now())) < 500, `${unix} is ${at} on the pool's clock`);
  };
  const [data] = pool.leases();
  near(data.grantedAtUnixMs, data.grantedAtMs);
  near(data.expiresAtUnixMs, data.expiresAtMs);
  assert.ok(Math.abs(data.expiresAtUnixMs - data.grantedAtUnixMs - 30_000) < 1);
  const json = lease.toJSON();
  near(json.grantedAtUnixMs, json.grantedAtMs);
  const cell = pool.cells('proxy', 'a')[1];
  assert.equal(cell.state, 'cooling');
  near(cell.coolingUntilUnixMs, cell.coolingUntilMs);
  const blocked = pool.resources().find((r) => r.value === 'b');
  near(blocked.block.untilUnixMs, blocked.block.untilMs);
  assert.ok(blocked.block.untilUnixMs > Date.now() + 59_000);
  const events = pool.drainEvents();
  for (const e of events) near(e.atUnixMs, e.atMs);
  const leased = events.find((e) => e.type === 'leased');
  near(leased.lease.expiresAtUnixMs, leased.lease.expiresAtMs);
  near(events.find((e) => e.type === 'cooled').untilUnixMs, events.find((e) => e.type === 'cooled').untilMs);
  near(events.find((e) => e.type === 'blocklisted').untilUnixMs, events.find((e) => e.type === 'blocklisted').untilMs);
  pool.close();
});
