// The holder's side: auto-renewal, the loss signal and maxHoldMs. The same
// cases run in the Python suite (tests/test_holder.py).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';

import { Pool, ManualClock, InvalidInputError, BlockedError, LeaseExpiredError } from 'repute';

/**
 * A pool whose leases lapse soon. Loss tests keep a TTL far above a
 * scheduling hiccup, so a starved watcher cannot turn the loss they cause
 * into an expiry.
 */
function shortPool(leaseTtlMs = 1_500) {
  const pool = new Pool({ leaseTtlMs, strategy: 'first', seed: 1 });
  pool.register('proxy', 'a');
  return pool;
}

/** Polls `condition` until it holds or `withinMs` passed. */
async function waitFor(condition, withinMs = 5_000) {
  const end = performance.now() + withinMs;
  while (performance.now() < end) {
    if (condition()) return true;
    await sleep(10);
  }
  return condition();
}

test('autoRenew holds a short lease far past its TTL', async () => {
  const pool = shortPool(300);
  const lease = await pool.acquire('c', { autoRenew: true });
  const token = lease.token;
  const end = performance.now() + 2_000;
  while (performance.now() < end) {
    // Nobody else is granted the permit while the holder keeps it.
    assert.equal(pool.tryAcquire('c'), null);
    await sleep(20);
  }
  assert.equal(lease.valid, true);
  assert.equal(lease.lost, false);
  assert.equal(lease.token, token);
  const kinds = pool.drainEvents().map((e) => e.type);
  assert.equal(kinds.includes('lease_expired'), false);
  // Renewed at a third of the TTL: about 20 renewals in 2 s.
  assert.ok(kinds.filter((k) => k === 'renewed').length >= 6, kinds.join());
  assert.equal(pool.stats().liveLeases, 1);
  assert.equal(await lease.release(), true);
  assert.notEqual(pool.tryAcquire('c'), null);
  pool.close();
});

test('a block loses an auto-renewed lease once', async () => {
  const pool = shortPool();
  const lease = await pool.acquire('c', { autoRenew: true });
  const lost = [];
  lease.on('lost', (loss) => lost.push(loss));
  pool.block('proxy', 'a');
  assert.ok(await waitFor(() => lost.length > 0));
  await sleep(600); // another renewal round: the event does not come again
  assert.deepEqual(lost, ['blocked']);
  assert.deepEqual([lease.lost, lease.loss, lease.valid], [true, 'blocked', false]);
  assert.equal(await lease.release(), false);
  pool.close();
});

test('a refused renewal loses the lease once', async () => {
  const pool = shortPool();
  const lease = await pool.acquire('c', { autoRenew: true });
  const lost = [];
  lease.on('lost', (loss) => lost.push(loss));
  pool.unregister('proxy', 'a', { force: true }); // revokes the lease
  assert.ok(await waitFor(() => lost.length > 0));
  await sleep(600);
  assert.deepEqual(lost, ['renewal_refused']);
  assert.equal(await lease.release(), false);
  pool.close();
});

test('a failed explicit renewal emits lost once', async () => {
  const pool = shortPool();
  const lease = await pool.acquire('c');
  const lost = [];
  lease.on('lost', (loss) => lost.push(loss));
  pool.block('proxy', 'a');
  await assert.rejects(lease.renew(), BlockedError);
  await assert.rejects(lease.renew(), LeaseExpiredError);
  assert.ok(await waitFor(() => lost.length > 0));
  await sleep(50);
  assert.deepEqual(lost, ['blocked']);
  pool.close();
});

test('a deadline passing unrenewed emits lost', async () => {
  const clock = new ManualClock();
  const pool = new Pool({ clock, leaseTtlMs: 10_000 });
  pool.register('proxy', 'a');
  const lease = await pool.acquire('c');
  const lost = [];
  lease.on('lost', (loss) => lost.push(loss));
  clock.advance(9_000); // the local deadline: TTL minus a tenth
  assert.ok(await waitFor(() => lost.length > 0));
  assert.deepEqual(lost, ['expired']);
  pool.close();
});

test('maxHoldMs ends an auto-renewed lease and frees its permit', async () => {
  const pool = shortPool();
  const lease = await pool.acquire('c', { autoRenew: true, maxHoldMs: 600 });
  const lost = [];
  lease.on('lost', (loss) => lost.push(loss));
  assert.ok(await waitFor(() => lost.length > 0));
  assert.deepEqual(lost, ['max_hold']);
  assert.equal(lease.released, true);
  assert.equal(lease.valid, false);
  // The permit came back at once, not a TTL later.
  const successor = pool.tryAcquire('c');
  assert.notEqual(successor, null);
  assert.equal(successor.token, lease.token + 1n);
  pool.close();
});

test('maxHoldMs goes with autoRenew', async () => {
  const pool = shortPool();
  await assert.rejects(pool.acquire('c', { maxHoldMs: 1_000 }), (e) => {
    assert.ok(e instanceof InvalidInputError);
    assert.deepEqual([e.field, e.rule], ['maxHoldMs', 'goes with autoRenew']);
    return true;
  });
  await assert.rejects(pool.acquire('c', { autoRenew: true, maxHoldMs: 0 }), { field: 'maxHoldMs' });
  assert.equal(pool.stats().liveLeases, 0);
  pool.close();
});

test('closing the pool loses watched leases once', async () => {
  const pool = shortPool();
  const lease = await pool.acquire('c', { autoRenew: true });
  const lost = [];
  lease.on('lost', (loss) => lost.push(loss));
  pool.close();
  assert.ok(await waitFor(() => lost.length > 0));
  await sleep(200);
  assert.deepEqual(lost, ['closed']);
});

test('a released lease is never lost', async () => {
  const pool = shortPool();
  const lease = await pool.acquire('c', { autoRenew: true });
  const lost = [];
  lease.on('lost', (loss) => lost.push(loss));
  assert.equal(await lease.release(), true);
  await sleep(600);
  assert.deepEqual(lost, []);
  assert.equal(lease.lost, false);
  pool.close();
});

test('withLease aborts its signal when the lease is lost', async () => {
  const pool = shortPool();
  const steps = [];
  const result = await pool
    .withLease(
      'c',
      async (lease, signal) => {
        steps.push(lease.leaseKind);
        pool.block('proxy', 'a');
        await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
        steps.push(signal.reason.loss);
        throw signal.reason;
      },
      { autoRenew: true },
    )
    .catch((e) => e);
  assert.ok(result instanceof LeaseExpiredError, `${result}`);
  assert.deepEqual(steps, ['client', 'blocked']);
  assert.equal(pool.stats().liveLeases, 0);
  pool.close();
});

test('withLease rejects when the lease ran out unseen while the callback ran', async () => {
  const clock = new ManualClock();
  const pool = new Pool({ clock, leaseTtlMs: 1_000 });
  pool.register('proxy', 'a');
  await assert.rejects(
    pool.withLease('c', async () => {
      clock.advance(2_000);
    }),
    LeaseExpiredError,
  );
  assert.equal(pool.stats().liveLeases, 0);
  pool.close();
});

test('acquire waits without limit by default, as in Python', async () => {
  const clock = new ManualClock();
  const pool = new Pool({ clock, leaseTtlMs: 1_000 });
  pool.register('proxy', 'a');
  // A block with an end (one without would refuse at once: nothing but an
  // unblock could serve the acquire).
  pool.block('proxy', 'a', { durationMs: 3_600_000 });
  let settled = false;
  const waiter = pool.acquire('c').finally(() => {
    settled = true;
  });
  clock.advance(60_000); // far past any lease TTL on the pool's clock
  await sleep(200);
  assert.equal(settled, false);
  pool.unblock('proxy', 'a'); // wakes the waiter
  const lease = await waiter;
  assert.equal(lease.value, 'a');
  await lease.release();
  pool.close();
});
