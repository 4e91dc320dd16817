// The attempt protocol's JavaScript surface, driven by hand as an adapter
// drives it, on an embedded pool: routes, steps, what was reported, which
// leases are held, and the pool's own waiting acquire underneath.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Pool, Attempts, ManualClock, NoResourceAvailableError } from '../index.js';
import { fieldOf } from './fixtures/adapters.mjs';

function pool(kind, values, options = {}) {
  const p = new Pool({ strategy: 'first' });
  for (const v of values) p.register(kind, v, options);
  return p;
}

const observations = (p, kind, value, context) => p.cells(kind, value).find((c) => c.context === context)?.observations ?? 0;

test("a resource's fault moves the request on; a success holds its lease until finished", async () => {
  const p = pool('proxy', ['http://a:1', 'http://b:1']);
  const a = new Attempts(p, { context: 'example.com' });
  const first = await a.acquire();
  assert.deepEqual(a.begin(first), { via: 'proxy', proxy: 'http://a:1' });
  assert.equal(a.answered(429, { headers: { 'Retry-After': '30' } }), 'retry');
  assert.equal(p.stats().liveLeases, 0, 'the refused lease is released');
  const second = await a.acquire();
  assert.equal(second.value, 'http://b:1', 'the tried proxy is excluded');
  a.begin(second);
  assert.equal(a.answered(200, { headers: [['content-type', 'text/plain']] }), 'stream');
  assert.deepEqual([p.stats().liveLeases, observations(p, 'proxy', 'http://b:1', 'example.com')], [1, 0]);
  a.finished();
  assert.deepEqual([p.stats().liveLeases, observations(p, 'proxy', 'http://b:1', 'example.com')], [0, 1]);
  assert.equal(a.made, 2);
  a.end();
});

test("a key's route is its credential header, as its provider documents it", async () => {
  const p = new Pool({ profiles: { claude: 'anthropic' } });
  p.register('openai', 'k1', { secret: 'sk-1' });
  p.register('claude', 'k2', { secret: 'sk-2' });
  const route = async (kind) => {
    const a = new Attempts(p, { context: 'm', kind });
    const r = a.begin(await a.acquire());
    a.end();
    return r;
  };
  assert.deepEqual(await route('openai'), { via: 'header', name: 'authorization', value: 'Bearer sk-1' });
  assert.deepEqual(await route('claude'), { via: 'header', name: 'x-api-key', value: 'sk-2' });
  assert.equal(p.stats().liveLeases, 0, 'end releases the lease in flight');
});

test("the same 400 on two keys is delivered unreported; a provider's 500 is retried while attempts last; a 400 no second key could judge is reported at the end", async () => {
  const p = pool('api-key', ['k1', 'k2'], { secret: 's' });
  const a = new Attempts(p, { context: 'm' });
  a.begin(await a.acquire());
  assert.equal(a.answered(400, { body: '{"error":{"message":"bad field"}}' }), 'retry');
  const second = await a.acquire();
  assert.equal(second.value, 'k2');
  a.begin(second);
  assert.equal(a.answered(400, { body: '{"error":{"message":"bad field"}}' }), 'deliver');
  a.end();
  assert.deepEqual([p.stats().liveLeases, observations(p, 'api-key', 'k1', 'm'), observations(p, 'api-key', 'k2', 'm')], [0, 0, 0]);

  const down = new Attempts(p, { context: 'm' });
  const tried = [];
  for (const step of ['retry', 'retry', 'deliver']) {
    const lease = await down.acquire();
    tried.push(lease.value);
    down.begin(lease);
    assert.equal(down.answered(500, { body: '{"error":{"type":"server_error"}}' }), step);
  }
  down.end();
  assert.deepEqual(tried.slice(0, 2).sort(), ['k1', 'k2'], 'another key first, then back to a tried one');
  assert.deepEqual([p.stats().liveLeases, observations(p, 'api-key', 'k1', 'm'), observations(p, 'api-key', 'k2', 'm')], [0, 0, 0]);

  const lone = pool('api-key', ['k'], { secret: 's' });
  const b = new Attempts(lone, { context: 'm' });
  b.begin(await b.acquire());
  assert.equal(b.answered(400, { body: '{"error":{"message":"bad field"}}' }), 'retry');
  const refusal = await b.acquire().catch((e) => e);
  assert.ok(refusal instanceof NoResourceAvailableError, 'only the suspect is left: give up');
  assert.equal(observations(lone, 'api-key', 'k', 'm'), 0, 'held back');
  b.end();
  const [cell] = lone.cells('api-key', 'k').filter((c) => c.context === 'm');
  assert.deepEqual([cell.observations, cell.consecutiveSuccesses], [1, 1], 'reported as the profile reads a 400 (the key worked) once the request ends');
});

test('the only proxy, failed on, is acquired again at once', async () => {
  const p = pool('proxy', ['http://a:1']);
  const a = new Attempts(p, { context: 'site' });
  a.begin(await a.acquire());
  assert.equal(a.failed('connection_reset'), 'retry');
  const again = await a.acquire();
  assert.equal(again.value, 'http://a:1');
  a.begin(again);
  assert.equal(a.answered(200), 'stream');
  a.finished();
  assert.equal(observations(p, 'proxy', 'http://a:1', 'site'), 2);
});

test("acquire waits with the pool's own waiting acquire, and gives up with the refusal when the time is up", async () => {
  const p = pool('proxy', ['http://a:1']);
  const held = await p.acquire('site', { timeoutMs: 0 });
  const a = new Attempts(p, { context: 'site', timeoutMs: 60_000 });
  const waiting = a.acquire();
  await held.release();
  const lease = await waiting;
  assert.equal(lease.value, 'http://a:1', 'woken by the release');
  a.begin(lease);
  a.end();

  const hold = await p.acquire('site', { timeoutMs: 0 });
  const short = new Attempts(p, { context: 'site', timeoutMs: 30 });
  const refusal = await short.acquire().catch((e) => e);
  assert.ok(refusal instanceof NoResourceAvailableError, String(refusal));
  assert.equal(refusal.leased, 1);
  short.end();
  await hold.release();
});

test('a request the pool knows cannot be served in time gives up at once', async () => {
  // The pool clock never moves: an attempt that waited for a grant the pool
  // knows is further away than the request's time would wait for ever.
  const p = new Pool({ strategy: 'first', clock: new ManualClock() });
  p.register('proxy', 'http://a:1');
  const first = new Attempts(p, { context: 'site', timeoutMs: 5_000 });
  first.begin(await first.acquire());
  assert.equal(first.answered(403), 'retry');
  first.end();
  // The site's ban: its first early trial is 10 s away, past the 5 s left.
  const next = new Attempts(p, { context: 'site', timeoutMs: 5_000 });
  const refusal = await next.acquire().catch((e) => e);
  assert.ok(refusal instanceof NoResourceAvailableError, String(refusal));
  assert.deepEqual(
    [refusal.cooling, refusal.retryAfterMs, refusal.expectedAfterMs, refusal.settled],
    [1, 10_000, 300_000, true],
  );
  next.end();
  // The early trial comes within 60 s, the ban's end does not: a trial
  // mostly finds the ban still on, so the request gives up at once too.
  const longer = new Attempts(p, { context: 'site', timeoutMs: 60_000 });
  assert.ok((await longer.acquire().catch((e) => e)) instanceof NoResourceAvailableError);
  longer.end();
});

test('on a durable store the attempt acquires off the JS thread, and what it reports is kept', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'repute-node-attempts-'));
  const store = `sqlite:${join(dir, 'pool.db')}`;
  try {
    const p = new Pool({ store, strategy: 'first' });
    p.register('proxy', 'http://a:1');
    p.register('proxy', 'http://b:1');
    const a = new Attempts(p, { context: 'site' });
    a.begin(await a.acquire());
    assert.equal(a.answered(403), 'retry');
    const second = await a.acquire();
    assert.equal(second.value, 'http://b:1');
    a.begin(second);
    assert.equal(a.answered(200), 'stream');
    a.finished();
    a.end();
    p.close();
    const reopened = new Pool({ store });
    const cell = (v) => reopened.cells('proxy', v).find((c) => c.context === 'site');
    assert.deepEqual([cell('http://a:1').state, cell('http://b:1').observations], ['cooling', 1]);
    reopened.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("bad plans and calls raise InvalidInputError naming the field", async () => {
  const p = pool('proxy', ['http://a:1']);
  assert.equal(fieldOf(() => new Attempts({}, { context: 'c' })), 'pool');
  assert.equal(fieldOf(() => new Attempts(p, { context: 'c', attempts: 0 })), 'attempts');
  assert.equal(fieldOf(() => new Attempts(p, { context: 'c', timeoutMs: -1 })), 'timeoutMs');
  assert.equal(fieldOf(() => new Attempts(p, { context: 'c', exclude: 'x' })), 'exclude');
  const a = new Attempts(p, { context: 'c' });
  assert.equal(fieldOf(() => a.answered(200)), 'attempt', 'an answer before begin');
  a.begin(await a.acquire());
  assert.equal(fieldOf(() => a.answered(700)), 'status');
  assert.equal(fieldOf(() => a.failed('exploded')), 'failure.kind');
  assert.equal(fieldOf(() => a.begin(/** @type {any} */ ({}))), 'lease');
  a.end();
});
