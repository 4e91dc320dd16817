// The undici dispatcher carrying requests through real tinyproxy processes
// to a local site that answers per exit address: which proxy carried each
// attempt, what the pool was told, which leases are still held.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { request, fetch } from 'undici';
import { Pool, dispatcher, ReputeDispatcher, Attempts, contextOf, NoResourceAvailableError } from '../index.js';
import { startProxies, targetSite, listen, exitOf, freePort, fieldOf } from './fixtures/adapters.mjs';

let proxies;
let site;
let target;

before(async () => {
  proxies = await startProxies(3);
  site = targetSite({
    shop: (exit) => (exit === exitOf(0) ? 'forbidden' : 'ok'),
    api: (exit) => (exit === exitOf(0) ? 'slow_down' : 'ok'),
    bad: () => 'bad',
    hang: (exit) => (exit === exitOf(0) ? 'hang' : 'ok'),
  });
  target = await listen(site.server);
});

after(() => {
  proxies?.stop();
  site?.server.closeAllConnections();
  site?.server.close();
});

/** A pool of the three proxies, chosen in registration order; the site is the path's first segment. */
function setup(extra = []) {
  const pool = new Pool({ strategy: 'first' });
  for (const url of [...extra, ...proxies.urls]) pool.register('proxy', url, { permits: 4 });
  const carrier = dispatcher(pool, { kind: 'proxy', context: (opts) => String(opts.path).split('/')[1] });
  return { pool, carrier };
}

const observations = (pool, value, context) =>
  pool.cells('proxy', value).find((c) => c.context === context)?.observations ?? 0;
const stateOf = (pool, value, context) => pool.cells('proxy', value).find((c) => c.context === context)?.state;

test('a request goes through a real proxy, which is told of its success and freed', async () => {
  const { pool, carrier } = setup();
  try {
    const res = await request(`${target}/news/1`, { dispatcher: carrier });
    assert.equal(res.statusCode, 200);
    assert.equal(await res.body.text(), exitOf(0), 'the target saw the first proxy');
    assert.equal(observations(pool, proxies.urls[0], 'news'), 1);
    assert.equal(pool.stats().liveLeases, 0);
    const viaFetch = await fetch(`${target}/news/2`, { dispatcher: carrier });
    assert.equal(await viaFetch.text(), exitOf(0));
    assert.equal(carrier.proxies, 1, 'one agent per proxy, reused');
  } finally {
    await carrier.close();
  }
});

test('a dead proxy is reported connection_reset and the request moves to the next', async () => {
  const dead = `http://127.0.0.1:${await freePort()}`;
  const { pool, carrier } = setup([dead]);
  try {
    const res = await request(`${target}/news/1`, { dispatcher: carrier });
    assert.equal(await res.body.text(), exitOf(0));
    const cell = pool.cells('proxy', dead).find((c) => c.context === 'news');
    assert.deepEqual([cell.observations, cell.consecutiveFailures], [1, 1], 'reported once, a failure');
    assert.equal(pool.stats().liveLeases, 0);
  } finally {
    await carrier.close();
  }
});

test("a 403 moves the request to another proxy and cools only that (proxy, site)", async () => {
  const { pool, carrier } = setup();
  try {
    const res = await request(`${target}/shop/item`, { dispatcher: carrier });
    assert.equal(res.statusCode, 200);
    assert.equal(await res.body.text(), exitOf(1), 'the second proxy carried it');
    assert.deepEqual(site.hits.filter((h) => h.startsWith('shop ')), [`shop ${exitOf(0)}`, `shop ${exitOf(1)}`]);
    assert.equal(stateOf(pool, proxies.urls[0], 'shop'), 'cooling');
    assert.equal(observations(pool, proxies.urls[1], 'shop'), 1);
    const elsewhere = await request(`${target}/news/2`, { dispatcher: carrier });
    assert.equal(await elsewhere.body.text(), exitOf(0), 'the first proxy still carries another site');
    const again = await request(`${target}/shop/other`, { dispatcher: carrier });
    assert.equal(await again.body.text(), exitOf(1), 'and not the shop while it cools');
    assert.equal(pool.stats().liveLeases, 0);
  } finally {
    await carrier.close();
  }
});

test('a 429 with Retry-After pauses that proxy on that site for the stated wait', async () => {
  const { pool, carrier } = setup();
  try {
    const res = await request(`${target}/api/q`, { dispatcher: carrier });
    assert.equal(await res.body.text(), exitOf(1));
    const refusal = await pool.acquire('api', { kind: 'proxy', exclude: proxies.urls.slice(1), timeoutMs: 0 }).catch((e) => e);
    assert.ok(refusal instanceof NoResourceAvailableError);
    assert.equal(refusal.rateLimited, 1, 'the first proxy is paused for the site');
    assert.ok(refusal.retryAfterMs > 25_000 && refusal.retryAfterMs <= 30_000, `${refusal.retryAfterMs}`);
    const cell = pool.cells('proxy', proxies.urls[0]).find((c) => c.context === 'api');
    assert.deepEqual([cell.cause, cell.consecutiveFailures], ['rate_limited', 0], 'paused for the wait, not a strike');
    assert.equal(stateOf(pool, proxies.urls[0], 'news'), undefined, 'only on that site');
  } finally {
    await carrier.close();
  }
});

test("the same 400 on two proxies is the request's own: delivered, neither proxy reported", async () => {
  const { pool, carrier } = setup();
  try {
    const before = site.hits.length;
    const res = await request(`${target}/bad/q`, { dispatcher: carrier });
    assert.equal(res.statusCode, 400);
    assert.equal(await res.body.text(), '{"error":"malformed query"}', 'the answer is replayed whole');
    assert.deepEqual(site.hits.slice(before), [`bad ${exitOf(0)}`, `bad ${exitOf(1)}`], 'a second proxy, not a third');
    for (const url of proxies.urls) assert.equal(observations(pool, url, 'bad'), 0, url);
    assert.equal(pool.stats().liveLeases, 0);
  } finally {
    await carrier.close();
  }
});

test('a proxy that never answers times out, is reported timeout, and the request moves on', async () => {
  const { pool, carrier } = setup();
  try {
    const res = await request(`${target}/hang/1`, { dispatcher: carrier, headersTimeout: 300 });
    assert.equal(await res.body.text(), exitOf(1));
    const cell = pool.cells('proxy', proxies.urls[0]).find((c) => c.context === 'hang');
    assert.deepEqual([cell.observations, cell.consecutiveFailures], [1, 1]);
    assert.equal(pool.stats().liveLeases, 0);
  } finally {
    await carrier.close();
  }
});

test('proxy agents are a bounded cache, and a closed dispatcher takes no request', async () => {
  const { pool } = setup();
  const one = new ReputeDispatcher(pool, { kind: 'proxy', maxProxies: 1 });
  const res = await request(`${target}/shop/1`, { dispatcher: one });
  assert.equal(await res.body.text(), exitOf(1), 'through two proxies');
  assert.equal(one.proxies, 1, 'the first agent was closed when the second came');
  await one.close();
  assert.equal(one.proxies, 0);
  const refused = await request(`${target}/news/1`, { dispatcher: one }).catch((e) => e);
  assert.equal(refused.code, 'UND_ERR_CLOSED');
});

test('the default context is the URL host; an API key of a model-reading profile counts in its model', () => {
  const pool = new Pool({ profiles: { llm: 'openai' } });
  assert.equal(contextOf(pool, 'http://Example.COM:8080/a'), 'example.com');
  assert.equal(contextOf(pool, 'https://api.test/v1/chat/completions', { kind: 'llm', body: '{"model":"gpt-test"}' }), 'gpt-test');
  assert.equal(contextOf(pool, 'https://api.test/v1/models', { kind: 'llm' }), 'api.test');
});

test('bad options raise InvalidInputError naming the field', () => {
  const pool = new Pool();
  assert.equal(fieldOf(() => dispatcher({}, {})), 'pool');
  assert.equal(fieldOf(() => dispatcher(pool, { attempts: 0 })), 'attempts');
  assert.equal(fieldOf(() => dispatcher(pool, { attempts: 17 })), 'attempts');
  assert.equal(fieldOf(() => dispatcher(pool, { timeoutMs: 0 })), 'timeoutMs');
  assert.equal(fieldOf(() => dispatcher(pool, { timeoutMs: 'soon' })), 'timeoutMs');
  assert.equal(fieldOf(() => dispatcher(pool, { where: 5 })), 'where');
  assert.equal(fieldOf(() => dispatcher(pool, { kind: 5 })), 'kind');
  assert.equal(fieldOf(() => dispatcher(pool, { context: 5 })), 'context');
  assert.equal(fieldOf(() => new ReputeDispatcher(pool, { maxProxies: 0 })), 'maxProxies');
  assert.equal(fieldOf(() => new Attempts(pool, {})), 'context');
  assert.equal(fieldOf(() => contextOf(pool, 'not a url')), 'url');
});
