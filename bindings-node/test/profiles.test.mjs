// What an answer means depends on what the resource is: a proxy's 403 is one
// site refusing one exit for a while, an API key's quota error pauses the key
// until its quota can have reset, a provider's overload is no key's fault.
// The tables are the host's; these tests check that JavaScript reaches them.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { Pool, ManualClock, InvalidInputError } from 'repute';

const QUOTA = JSON.stringify({
  error: {
    message: 'You exceeded your current quota, please check your plan and billing details.',
    type: 'insufficient_quota',
    param: null,
    code: 'insufficient_quota',
  },
});

test("a site's 403 cools the proxy for that site only, longer with each refusal", async () => {
  const clock = new ManualClock();
  const pool = new Pool({ clock, strategy: 'first' });
  pool.register('proxy', 'p1');
  const lease = pool.tryAcquire('shop.example');
  await lease.reportHttp(403, { latencyMs: 100 });
  await lease.release();
  const cell = pool.cells('proxy', 'p1')[1];
  assert.deepEqual([cell.state, cell.cause, cell.coolingUntilMs], ['cooling', 'blocked', 300_000]);
  const other = pool.tryAcquire('news.example');
  assert.ok(other, 'another site still gets the proxy');
  await other.release();
  clock.advance(300_000);
  const trial = pool.tryAcquire('shop.example');
  assert.equal(trial.leaseKind, 'trial');
  await trial.reportHttp(403);
  await trial.release();
  assert.equal(pool.cells('proxy', 'p1')[1].coolingUntilMs, 900_000);
});

test('a declared profile, a quota body and an overload', async () => {
  const clock = new ManualClock();
  const pool = new Pool({ clock, strategy: 'first', profiles: { llm: 'openai', relay: 'anthropic' } });
  pool.register('llm', 'k1');
  pool.register('relay', 'c1');
  await pool.reportHttp('llm', 'k1', 'gpt-4o', 429, { body: new TextEncoder().encode(QUOTA) });
  assert.equal(pool.tryAcquire('o3', { kind: 'llm' }), null, 'the key pauses for every model');
  clock.advance(3_600_000);
  const back = pool.tryAcquire('o3', { kind: 'llm' });
  assert.ok(back);
  await back.release();
  const overloaded = JSON.stringify({ type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } });
  for (let i = 0; i < 5; i++) await pool.reportHttp('relay', 'c1', 'claude', 529, { body: overloaded });
  const cells = pool.cells('relay', 'c1').map((c) => [c.context ?? null, c.observations, c.score]);
  assert.deepEqual(cells, [[null, 0, 0]], 'nothing was reported');
});

test('bad profiles and bodies are named', async () => {
  assert.throws(
    () => new Pool({ profiles: { relay: 'socks' } }),
    (e) =>
      e instanceof InvalidInputError &&
      e.field === 'profiles' &&
      e.rule === 'must be one of generic, proxy, api-key, openai, anthropic, gemini',
  );
  const pool = new Pool({ strategy: 'first' });
  pool.register('openai', 'k1');
  await assert.rejects(pool.reportHttp('openai', 'k1', 'gpt', 429, { body: 42 }), { field: 'body' });
});
