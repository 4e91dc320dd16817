// Many concurrent acquire() promises on few permits: every one is served,
// and no permit is ever held twice at once.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';

import { Pool } from 'repute';

test('concurrent acquires never double-grant a permit and all complete', async () => {
  const pool = new Pool({ seed: 3 });
  pool.register('proxy', 'a');
  pool.register('proxy', 'b', { permits: 2 });
  pool.register('proxy', 'c');

  const held = new Set();
  const lastToken = new Map();
  let maxHeld = 0;
  const worker = async (i) =>
    pool.withLease(
      `site-${i % 3}`,
      async (lease) => {
        const permit = `${lease.value}/${lease.permit}`;
        assert.ok(!held.has(permit), `${permit} granted twice`);
        assert.ok(lease.token > (lastToken.get(permit) ?? 0n), `${permit} token did not increase`);
        lastToken.set(permit, lease.token);
        held.add(permit);
        maxHeld = Math.max(maxHeld, held.size);
        await sleep(i % 4);
        held.delete(permit);
        return i;
      },
      { timeoutMs: 20_000 },
    );

  const results = await Promise.all(Array.from({ length: 200 }, (_, i) => worker(i)));
  assert.deepEqual(results, Array.from({ length: 200 }, (_, i) => i));
  assert.equal(maxHeld, 4, 'all four permits were in use at once');
  assert.equal(pool.stats().liveLeases, 0);
  const granted = [...lastToken.values()].reduce((a, b) => a + b, 0n);
  assert.equal(granted, 200n, 'one token per grant');
  pool.close();
});
