// got (its hooks, `gotOptions`) and axios (its fetch adapter on repute's
// fetch, `axiosConfig`) carrying requests through real tinyproxy processes
// to a local site that answers per exit address, and with a pool of keys to
// a local provider in OpenAI's format: which resource carried each attempt,
// what the pool was told, which leases are still held.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import got, { HTTPError } from 'got';
import axios from 'axios';
import * as repute from '../index.js';
import { startProxies, targetSite, provider, listen, exitOf, freePort, fieldOf } from './fixtures/adapters.mjs';

const { Pool } = repute;
let proxies;
let site;
let target;
let api;
let base;

before(async () => {
  proxies = await startProxies(2);
  site = targetSite({
    shop: (exit) => (exit === exitOf(0) ? 'forbidden' : 'ok'),
    bad: () => 'bad',
    hang: (exit) => (exit === exitOf(0) ? 'hang' : 'ok'),
    never: () => 'hang',
  });
  target = await listen(site.server);
  api = provider();
  base = await listen(api.server);
});

after(() => {
  proxies?.stop();
  for (const server of [site?.server, api?.server]) {
    server?.closeAllConnections();
    server?.close();
  }
});

/** The proxies (after `extra`), chosen in registration order. */
function proxyPool(extra = [], urls = proxies.urls) {
  const pool = new Pool({ strategy: 'first' });
  for (const url of [...extra, ...urls]) pool.register('proxy', url, { permits: 4 });
  return pool;
}

/** Keys chosen in registration order (value `k-<name>`, secret `sk-<name>`). */
function keys(...names) {
  const pool = new Pool({ strategy: 'first' });
  for (const name of names) pool.register('openai', `k-${name}`, { permits: 4, secret: `sk-${name}` });
  return pool;
}

const cellOf = (pool, kind, value, context) => pool.cells(kind, value).find((c) => c.context === context);
/** The site a request counts in: its path's first segment. */
const bySite = (url) => new URL(String(url)).pathname.split('/')[1];
const chat = (content) => ({ model: 'gpt-test', messages: [{ role: 'user', content }] });

test('got: a dead proxy and a banned one move the request on; the ban cools that site only; every lease released', async () => {
  const dead = `http://127.0.0.1:${await freePort()}`;
  const pool = proxyPool([dead]);
  const options = repute.gotOptions(pool, { kind: 'proxy', context: (o) => bySite(o.url) });
  const client = got.extend(options);
  try {
    const from = site.hits.length;
    assert.equal(await client(`${target}/shop/1`).text(), exitOf(1));
    assert.deepEqual(site.hits.slice(from), [`shop ${exitOf(0)}`, `shop ${exitOf(1)}`]);
    const deadCell = cellOf(pool, 'proxy', dead, 'shop');
    assert.deepEqual([deadCell.observations, deadCell.consecutiveFailures], [1, 1], 'the dead proxy reported once, a failure');
    assert.equal(cellOf(pool, 'proxy', proxies.urls[0], 'shop').state, 'cooling');
    const news = site.hits.length;
    assert.equal(await client(`${target}/news/1`).text(), exitOf(0), 'the banned proxy still carries another site');
    assert.deepEqual(site.hits.slice(news), [`news ${exitOf(0)}`]);
    assert.equal(cellOf(pool, 'proxy', dead, 'news').consecutiveFailures, 1, 'the dead proxy, fresh there, tried first');
    assert.equal(cellOf(pool, 'proxy', proxies.urls[1], 'shop').observations, 1);
    assert.equal(options.proxies, 3, 'one agent per proxy tried, reused');
    assert.equal(pool.stats().liveLeases, 0);
  } finally {
    options.close();
  }
});

test("got: when no proxy is left the last answer is the result; the same 400 on two proxies is the request's own", async () => {
  const pool = proxyPool([], [proxies.urls[0]]);
  const options = repute.gotOptions(pool, { kind: 'proxy', context: (o) => bySite(o.url), timeoutMs: 300 });
  const client = got.extend(options);
  const both = proxyPool();
  const options2 = repute.gotOptions(both, { kind: 'proxy', context: (o) => bySite(o.url) });
  try {
    const banned = await client(`${target}/shop/2`).catch((e) => e);
    assert.ok(banned instanceof HTTPError, String(banned));
    assert.deepEqual([banned.response.statusCode, banned.response.body], [403, '<h1>Access denied</h1>']);
    const refused = await client(`${target}/shop/3`).catch((e) => e);
    assert.ok(refused.cause instanceof repute.NoResourceAvailableError, 'the proxy cools there: no answer, the refusal');
    const fresh = proxyPool([], [proxies.urls[0]]);
    const posting = repute.gotOptions(fresh, { kind: 'proxy', timeoutMs: 300 });
    const posted = await got.extend(posting).post(`${target}/shop/4`, { json: { q: 1 } }).catch((e) => e);
    posting.close();
    assert.deepEqual([posted.response?.statusCode, posted.response?.body], [403, '<h1>Access denied</h1>'], 'a request with a body too');
    assert.equal(pool.stats().liveLeases + fresh.stats().liveLeases, 0);

    const from = site.hits.length;
    const own = await got.extend(options2).post(`${target}/bad/q`, { body: 'x' }).catch((e) => e);
    assert.ok(own instanceof HTTPError, String(own));
    assert.deepEqual([own.response.statusCode, own.response.body], [400, '{"error":"malformed query"}']);
    assert.deepEqual(site.hits.slice(from), [`bad ${exitOf(0)}`, `bad ${exitOf(1)}`], 'a second proxy, not a third');
    for (const url of proxies.urls) assert.equal(cellOf(both, 'proxy', url, 'bad'), undefined, url);
    assert.equal(both.stats().liveLeases, 0);
  } finally {
    options.close();
    options2.close();
  }
});

test('got: a proxy that never answers times out and the request moves on; requests at once keep their own attempts; an abort frees its lease', async () => {
  const pool = proxyPool();
  const options = repute.gotOptions(pool, { kind: 'proxy', context: (o) => bySite(o.url) });
  const client = got.extend(options);
  try {
    assert.equal(await client(`${target}/hang/1`, { timeout: { response: 300 } }).text(), exitOf(1));
    const cell = cellOf(pool, 'proxy', proxies.urls[0], 'hang');
    assert.deepEqual([cell.observations, cell.consecutiveFailures], [1, 1], 'reported once, a failure');

    const from = site.hits.length;
    const pages = await Promise.all([1, 2, 3, 4].map((i) => client(`${target}/news/${i}`).text()));
    assert.deepEqual(pages, [exitOf(0), exitOf(0), exitOf(0), exitOf(0)]);
    assert.equal(site.hits.length - from, 4, 'one attempt each');
    assert.equal(cellOf(pool, 'proxy', proxies.urls[0], 'news').observations, 4);
    assert.equal(pool.stats().liveLeases, 0);

    const abort = new AbortController();
    const pending = client(`${target}/never/1`, { signal: abort.signal }).catch((e) => e);
    while (pool.stats().liveLeases === 0) await new Promise((ok) => setTimeout(ok, 5));
    abort.abort();
    assert.equal((await pending).name, 'AbortError');
    assert.equal(pool.stats().liveLeases, 0, 'released, not reported');
    assert.equal(cellOf(pool, 'proxy', proxies.urls[0], 'never'), undefined);
  } finally {
    options.close();
  }
});

test("got: each key's credential replaces the request's; a dead key moves the request on", async () => {
  const pool = keys('dead', 'ok');
  const client = got.extend(repute.gotOptions(pool, { kind: 'openai' }), { headers: { authorization: 'Bearer sk-placeholder' } });
  const from = api.keys.length;
  const answer = await client.post(`${base}/v1/chat/completions`, { json: chat('hi') }).json();
  assert.equal(answer.choices[0].message.content, 'hello');
  assert.deepEqual(api.keys.slice(from), ['sk-dead', 'sk-ok']);
  assert.deepEqual(pool.resources().find((r) => r.value === 'k-dead').block, { reason: 'auth_failed' });
  assert.equal(cellOf(pool, 'openai', 'k-ok', 'gpt-test').observations, 1, 'counted in the model the JSON body asks for');
  assert.equal(pool.stats().liveLeases, 0);
});

test('axios: its fetch adapter on repute.fetch carries requests through proxies and keys', async () => {
  const dead = `http://127.0.0.1:${await freePort()}`;
  const pool = proxyPool([dead]);
  const config = repute.axiosConfig(pool, { kind: 'proxy', context: (o) => bySite(new URL(String(o.path), String(o.origin))) });
  const client = axios.create(config);
  const keyPool = keys('dead', 'ok');
  const keyConfig = repute.axiosConfig(keyPool, { kind: 'openai' });
  try {
    const from = site.hits.length;
    const res = await client.get(`${target}/shop/3`, { responseType: 'text' });
    assert.deepEqual([res.status, res.data], [200, exitOf(1)]);
    assert.deepEqual(site.hits.slice(from), [`shop ${exitOf(0)}`, `shop ${exitOf(1)}`]);
    assert.equal(cellOf(pool, 'proxy', dead, 'shop').consecutiveFailures, 1);
    assert.equal(cellOf(pool, 'proxy', proxies.urls[0], 'shop').state, 'cooling');
    assert.equal(pool.stats().liveLeases, 0);

    const ai = axios.create({ ...keyConfig, headers: { authorization: 'Bearer sk-placeholder' } });
    const seen = api.keys.length;
    const completion = await ai.post(`${base}/v1/chat/completions`, chat('hi'));
    assert.equal(completion.data.choices[0].message.content, 'hello');
    assert.deepEqual(api.keys.slice(seen), ['sk-dead', 'sk-ok']);
    const refused = await ai.post(`${base}/v1/chat/completions`, chat('malformed')).catch((e) => e);
    assert.ok(axios.isAxiosError(refused), String(refused));
    assert.equal(refused.response.status, 400);
    assert.equal(refused.response.data.error.message, "Invalid 'messages[0].content'.");
    assert.equal(keyPool.stats().liveLeases, 0);
  } finally {
    await config.env.fetch.dispatcher.close();
    await keyConfig.env.fetch.dispatcher.close();
  }
});

test('bad options raise InvalidInputError naming the field', async () => {
  const pool = new Pool();
  assert.equal(fieldOf(() => repute.gotOptions({}, {})), 'pool');
  assert.equal(fieldOf(() => repute.gotOptions(pool, { attempts: 0 })), 'attempts');
  assert.equal(fieldOf(() => repute.gotOptions(pool, { kind: 5 })), 'kind');
  assert.equal(fieldOf(() => repute.gotOptions(pool, { context: 5 })), 'context');
  assert.equal(fieldOf(() => repute.gotOptions(pool, { maxProxies: 0 })), 'maxProxies');
  assert.equal(fieldOf(() => repute.axiosConfig({}, {})), 'pool');
  assert.equal(fieldOf(() => repute.axiosConfig(pool, { timeoutMs: 0 })), 'timeoutMs');
  pool.register('proxy', 'http://127.0.0.1:1');
  const streamed = await new Promise((ok) => got.extend(repute.gotOptions(pool)).stream(`${target}/news/1`).on('error', ok).resume());
  assert.equal(streamed.cause?.field ?? streamed.field, 'isStream');
  assert.equal(pool.stats().liveLeases, 0);
});
