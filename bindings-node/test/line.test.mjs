// The line of sleeping acquires (lib/line.js): a release wakes the first in
// line alone, a wake it cannot use goes to the next that wishes otherwise.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';

import { Pool } from 'repute';

const { Line } = createRequire(import.meta.url)('../lib/line.js');

const LONG = 60_000;

/** `n` sleepers in line, wishing `wishes[i]`; each records what woke it. */
function sleepers(line, wishes) {
  const woken = wishes.map(() => undefined);
  const places = wishes.map((wish, i) => {
    const place = line.place();
    const ac = new AbortController();
    const slept = place.sleep(LONG, wish, ac.signal).then(() => {
      woken[i] = 'woken';
    });
    return { place, ac, slept };
  });
  return { woken, places };
}

const tick = () => new Promise((resolve) => setImmediate(resolve));

test('a release wakes the first in line alone', async () => {
  const line = new Line();
  const { woken, places } = sleepers(line, ['shop', 'shop', 'shop']);
  line.wakeOne();
  await tick();
  assert.deepEqual(woken, ['woken', undefined, undefined]);
  assert.equal(line.length, 2);
  places[0].place.granted();
  line.wakeOne();
  await tick();
  assert.deepEqual(woken, ['woken', 'woken', undefined]);
  for (const p of places) p.ac.abort();
  await Promise.all(places.map((p) => p.slept));
  assert.equal(line.length, 0);
});

test('a wake refused is handed to the next that wishes otherwise', async () => {
  const line = new Line();
  const { woken, places } = sleepers(line, ['keys', 'keys', 'proxies', 'keys']);
  line.wakeOne();
  await tick();
  assert.deepEqual(woken, ['woken', undefined, undefined, undefined]);
  // The first could not use it: the second asks alike and is answered
  // alike, so the wake goes to the third.
  places[0].place.refused();
  await tick();
  assert.deepEqual(woken, ['woken', undefined, 'woken', undefined]);
  // Nor could the third: nobody else wishes otherwise.
  places[2].place.refused();
  await tick();
  assert.deepEqual(woken, ['woken', undefined, 'woken', undefined]);
  for (const p of places) p.ac.abort();
  await Promise.all(places.map((p) => p.slept));
});

test('a sleeper that tried since the release is not woken for it', async () => {
  const line = new Line();
  const first = sleepers(line, ['a']);
  line.wakeOne(); // the first is woken and tries...
  await tick();
  const later = sleepers(line, ['b']); // ...while another lies down after it
  first.places[0].place.refused();
  await tick();
  assert.deepEqual(later.woken, [undefined], 'it lay down after the release: it saw what was freed');
  later.places[0].ac.abort();
  await later.places[0].slept;
});

test('a change that frees many wakes every sleeper', async () => {
  const line = new Line();
  const { woken, places } = sleepers(line, ['a', 'b', 'a']);
  line.wakeAll();
  await Promise.all(places.map((p) => p.slept));
  assert.deepEqual(woken, ['woken', 'woken', 'woken']);
  assert.equal(line.length, 0);
});

test('an acquire aborted after its wake hands it on', async () => {
  const pool = new Pool({ strategy: 'first' });
  pool.register('proxy', 'a');
  const held = pool.tryAcquire('shop');
  const ac = new AbortController();
  const first = pool.acquire('shop', { timeoutMs: 5_000, signal: ac.signal });
  await tick();
  const second = pool.acquire('shop', { timeoutMs: 5_000 });
  await tick();
  held.release(); // wakes the first, aborted before it can try
  ac.abort();
  await assert.rejects(first, { name: 'AbortError' });
  const lease = await second;
  assert.equal(lease.token, 2n);
  lease.release();
  pool.close();
});
