// Crawlee's HttpCrawler sending each request through a proxy the pool
// leases (`crawleeProxies`), through real tinyproxy processes, to two local
// sites (two hosts, two contexts) of which one bans the first proxy, with a
// dead proxy first in line: which proxy carried which request, what the pool
// was told, which leases are still held.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { HttpCrawler, ProxyConfiguration, Configuration, log } from '@crawlee/http';
import { Pool, crawleeProxies, CrawleeProxies, InvalidInputError } from '../index.js';
import { startProxies, targetSite, listen, exitOf, freePort, fieldOf } from './fixtures/adapters.mjs';

log.setLevel(log.LEVELS.OFF);

let proxies;
let banning;
let open;
let shop;
let news;

before(async () => {
  proxies = await startProxies(2);
  banning = targetSite({ shop: (exit) => (exit === exitOf(0) ? 'forbidden' : 'ok') });
  shop = await listen(banning.server);
  open = targetSite({});
  await new Promise((ok) => open.server.listen(0, '127.0.0.2', ok));
  news = `http://127.0.0.2:${open.server.address().port}`;
});

after(() => {
  proxies?.stop();
  for (const s of [banning, open]) {
    s?.server.closeAllConnections();
    s?.server.close();
  }
});

const cellOf = (pool, value, context) => pool.cells('proxy', value).find((c) => c.context === context);

/** A crawler of `urls` through `proxies`, one request at a time; resolves to `url -> body` of what it got. */
async function crawl(adapter, urls, extra = {}) {
  const got = new Map();
  const failed = [];
  const crawler = new HttpCrawler(
    {
      proxyConfiguration: new ProxyConfiguration({ newUrlFunction: adapter.newUrlFunction }),
      ...adapter.hooks,
      failedRequestHandler: async (context, error) => {
        await adapter.failedRequestHandler(context, error);
        failed.push(context.request.url);
      },
      additionalMimeTypes: ['text/plain'],
      maxConcurrency: 1,
      maxRequestRetries: 4,
      requestHandler: async ({ request, body }) => {
        got.set(request.url, String(body));
      },
      ...extra,
    },
    new Configuration({ persistStorage: false, purgeOnStart: true }),
  );
  await crawler.run(urls);
  return { got, failed };
}

test('each request through a leased proxy: the dead one and the banned one move it on, the ban cools that site only, every lease released', async () => {
  const dead = `http://127.0.0.1:${await freePort()}`;
  const pool = new Pool({ strategy: 'first' });
  for (const url of [dead, ...proxies.urls]) pool.register('proxy', url, { permits: 4 });
  const adapter = crawleeProxies(pool);
  const shopHits = banning.hits.length;
  const newsHits = open.hits.length;

  const { got, failed } = await crawl(adapter, [`${shop}/shop/1`, `${news}/news/1`, `${shop}/shop/2`]);

  assert.deepEqual(failed, []);
  assert.deepEqual(
    Object.fromEntries(got),
    { [`${shop}/shop/1`]: exitOf(1), [`${news}/news/1`]: exitOf(0), [`${shop}/shop/2`]: exitOf(1) },
    'the banning site got the second proxy, the other site the first',
  );
  assert.deepEqual(banning.hits.slice(shopHits), [`shop ${exitOf(0)}`, `shop ${exitOf(1)}`, `shop ${exitOf(1)}`], 'the banned proxy tried once on that site');
  assert.deepEqual(open.hits.slice(newsHits), [`news ${exitOf(0)}`]);

  assert.equal(cellOf(pool, proxies.urls[0], '127.0.0.1').state, 'cooling', 'the ban cools the proxy on the banning site');
  const elsewhere = cellOf(pool, proxies.urls[0], '127.0.0.2');
  assert.deepEqual([elsewhere.state, elsewhere.observations, elsewhere.consecutiveSuccesses], ['healthy', 1, 1], 'and not on the other');
  assert.deepEqual(cellOf(pool, proxies.urls[1], '127.0.0.1').observations, 2);
  const deadCell = cellOf(pool, dead, '127.0.0.1');
  assert.deepEqual([deadCell.observations, deadCell.consecutiveFailures], [2, 2], 'the dead proxy tried first by each request there, reported a failure each time');
  assert.equal(cellOf(pool, dead, '127.0.0.2').consecutiveFailures, 1);
  assert.equal(pool.stats().liveLeases, 0, 'every lease released');
  assert.equal(adapter.pending, 0, 'no request left open');
});

test('a request no proxy can carry fails in Crawlee with the refusal, and leaves no lease behind', async () => {
  const pool = new Pool({ strategy: 'first' });
  pool.register('proxy', proxies.urls[0], { permits: 4 });
  const adapter = crawleeProxies(pool, { attempts: 2, timeoutMs: 300 });
  const { got, failed } = await crawl(adapter, [`${shop}/shop/3`], { maxRequestRetries: 2 });
  assert.deepEqual([...got.keys()], []);
  assert.deepEqual(failed, [`${shop}/shop/3`]);
  assert.equal(cellOf(pool, proxies.urls[0], '127.0.0.1').state, 'cooling');
  assert.equal(pool.stats().liveLeases, 0);
  assert.equal(adapter.pending, 0);
});

test("a proxy's secret is its user and password in the URL Crawlee gets; the lease waits for the answer", async () => {
  const pool = new Pool();
  pool.register('proxy', '127.0.0.1:3128', { secret: 'crawler:p@ss:word' });
  const adapter = crawleeProxies(pool);
  const request = { url: 'http://shop.test/a', uniqueKey: 'a' };
  assert.equal(await adapter.newUrlFunction('s', { request }), 'http://crawler:p%40ss%3Aword@127.0.0.1:3128/');
  assert.deepEqual([pool.stats().liveLeases, adapter.pending], [1, 1]);
  await adapter.failedRequestHandler({ request }, Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }));
  assert.deepEqual([pool.stats().liveLeases, adapter.pending], [0, 0]);
  assert.equal(pool.cells('proxy', '127.0.0.1:3128').find((c) => c.context === 'shop.test').consecutiveFailures, 1);
});

test('bad options raise InvalidInputError naming the field', async () => {
  const pool = new Pool();
  assert.equal(fieldOf(() => crawleeProxies({}, {})), 'pool');
  assert.equal(fieldOf(() => new CrawleeProxies(pool, { attempts: 0 })), 'attempts');
  assert.equal(fieldOf(() => crawleeProxies(pool, { kind: 5 })), 'kind');
  assert.equal(fieldOf(() => crawleeProxies(pool, { context: 5 })), 'context');
  assert.equal(fieldOf(() => crawleeProxies(pool, { timeoutMs: -1 })), 'timeoutMs');
  const refused = await crawleeProxies(pool).newUrlFunction('s', {}).catch((e) => e);
  assert.ok(refused instanceof InvalidInputError);
  assert.equal(refused.field, 'request');
});
