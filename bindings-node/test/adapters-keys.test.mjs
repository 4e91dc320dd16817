// `repute.fetch` and the real openai and @google/genai SDKs on a pool of
// API keys, against a local provider in OpenAI's and Gemini's documented
// formats: which key carried each attempt, what the pool was told, which
// leases are still held.
import { test, before, after } from 'node:test';
import { createServer } from 'node:http';
import { gzipSync } from 'node:zlib';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { GoogleGenAI } from '@google/genai';
import * as repute from '../index.js';
import { provider, listen } from './fixtures/adapters.mjs';

const { Pool } = repute;
let api;
let base;

before(async () => {
  api = provider();
  base = await listen(api.server);
});

after(() => api?.server.close());

/** Keys chosen in registration order (value `k-<name>`, secret `sk-<name>`). */
function keys(...names) {
  const pool = new Pool({ strategy: 'first' });
  for (const name of names) pool.register('openai', `k-${name}`, { permits: 4, secret: `sk-${name}` });
  return pool;
}

const chat = (content, extra = {}) => ({
  method: 'POST',
  headers: { 'content-type': 'application/json', authorization: 'Bearer sk-placeholder' },
  body: JSON.stringify({ model: 'gpt-test', messages: [{ role: 'user', content }], ...extra }),
});
const seen = (from) => api.keys.slice(from);
const cell = (pool, name, context = 'gpt-test') => pool.cells('openai', `k-${name}`).find((c) => c.context === context);

test("a dead key, a spent key and a busy key each move the request on; the next one goes straight to the good key", async () => {
  const pool = keys('dead', 'spent', 'busy', 'ok');
  const f = repute.fetch(pool, { kind: 'openai', attempts: 4 });
  try {
    const from = api.keys.length;
    const res = await f(`${base}/v1/chat/completions`, chat('hi'));
    assert.equal(res.status, 200);
    assert.equal((await res.json()).choices[0].message.content, 'hello');
    assert.deepEqual(seen(from), ['sk-dead', 'sk-spent', 'sk-busy', 'sk-ok'], "each key's credential replaced the request's");
    const [dead] = pool.resources().filter((r) => r.value === 'k-dead');
    assert.deepEqual(dead.block, { reason: 'auth_failed' }, 'the 401 key is blocked everywhere');
    const spent = pool.cells('openai', 'k-spent').find((c) => c.context === undefined);
    assert.equal(spent.cause, 'quota_exhausted', 'the spent key pauses everywhere');
    assert.equal(cell(pool, 'busy').cause, 'rate_limited');
    assert.equal(cell(pool, 'ok').observations, 1, 'counted in the model asked for');
    assert.equal(pool.stats().liveLeases, 0);

    const next = api.keys.length;
    await (await f(`${base}/v1/chat/completions`, chat('again'))).json();
    assert.deepEqual(seen(next), ['sk-ok'], 'the dead, spent and busy keys are not tried again');
  } finally {
    await f.dispatcher.close();
  }
});

test('a streamed answer holds its key until its body is read to the end', async () => {
  const pool = keys('ok');
  const f = repute.fetch(pool, { kind: 'openai' });
  try {
    const res = await f(`${base}/v1/chat/completions`, chat('hi', { stream: true }));
    assert.equal(res.headers.get('content-type'), 'text/event-stream');
    const reader = res.body.getReader();
    const first = new TextDecoder().decode((await reader.read()).value);
    assert.match(first, /"hel"/);
    assert.equal(pool.stats().liveLeases, 1, 'held while the stream is open');
    assert.equal(cell(pool, 'ok'), undefined, 'nothing reported yet');
    api.finishStream();
    let rest = '';
    for (let r = await reader.read(); !r.done; r = await reader.read()) rest += new TextDecoder().decode(r.value);
    assert.match(rest, /\[DONE\]/);
    await new Promise((ok) => setImmediate(ok));
    assert.equal(pool.stats().liveLeases, 0, 'released once read');
    assert.equal(cell(pool, 'ok').observations, 1, 'and reported a success');
  } finally {
    await f.dispatcher.close();
  }
});

test('a request aborted while it waits for a key, or while its answer streams, leaves no lease behind', async () => {
  const pool = new Pool();
  pool.register('openai', 'k-ok', { permits: 1, secret: 'sk-ok' });
  const f = repute.fetch(pool, { kind: 'openai' });
  try {
    const busy = await pool.acquire('gpt-test', { timeoutMs: 0 });
    const waiting = new AbortController();
    const pending = f(`${base}/v1/chat/completions`, { ...chat('hi'), signal: waiting.signal }).catch((e) => e);
    await new Promise((ok) => setTimeout(ok, 20));
    waiting.abort();
    assert.equal((await pending).name, 'AbortError');
    await busy.release();
    assert.equal(pool.stats().liveLeases, 0);

    const streaming = new AbortController();
    const res = await f(`${base}/v1/chat/completions`, { ...chat('hi', { stream: true }), signal: streaming.signal });
    const reader = res.body.getReader();
    await reader.read();
    assert.equal(pool.stats().liveLeases, 1);
    streaming.abort();
    await reader.read().catch(() => {});
    await new Promise((ok) => setImmediate(ok));
    assert.equal(pool.stats().liveLeases, 0, 'released when the caller gave up the body');
    api.finishStream();
  } finally {
    await f.dispatcher.close();
  }
});

test("an error's compressed body and its rate-limit headers, in any case, are read: a spent quota pauses the key for its Retry-After, a spent window for its reset", async () => {
  // A provider of its own: gzip-encoded errors, and headers among others the profile does not read.
  const server = createServer((req, res) => {
    const key = req.headers.authorization;
    const answer = (status, headers, error) =>
      res.writeHead(status, { 'content-type': 'application/json', 'content-encoding': 'gzip', 'X-Request-Id': 'req-1', ...headers }).end(gzipSync(JSON.stringify({ error })));
    if (key === 'Bearer sk-spent') answer(429, { 'Retry-After': '120' }, { message: 'You exceeded your current quota.', type: 'insufficient_quota', code: 'insufficient_quota' });
    else if (key === 'Bearer sk-window')
      answer(429, { 'X-RateLimit-Remaining-Requests': '0', 'X-RateLimit-Reset-Requests': '20s' }, { message: 'Rate limit reached.', type: 'requests', code: 'rate_limit_exceeded' });
    else res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
  });
  const url = `${await listen(server)}/v1/chat/completions`;
  const pool = keys('spent', 'window', 'ok');
  const f = repute.fetch(pool, { kind: 'openai', attempts: 3 });
  try {
    const res = await f(url, chat('hi'));
    assert.deepEqual(await res.json(), { ok: true });
    const now = pool.now();
    const spent = pool.cells('openai', 'k-spent').find((c) => c.context === undefined);
    assert.equal(spent.cause, 'quota_exhausted', 'the body, read through its gzip, named the spent quota');
    assert.ok(Math.abs(spent.coolingUntilMs - now - 120_000) < 2_000, `paused for Retry-After: ${spent.coolingUntilMs - now} ms`);
    const window = cell(pool, 'window');
    assert.equal(window.cause, 'rate_limited');
    assert.ok(Math.abs(window.coolingUntilMs - now - 20_000) < 2_000, `paused until the window resets: ${window.coolingUntilMs - now} ms`);
  } finally {
    await f.dispatcher.close();
    server.close();
  }
});

test("the same 400 on two keys is the request's own: delivered with its body, neither key reported", async () => {
  const pool = keys('a', 'b', 'c');
  const f = repute.fetch(pool, { kind: 'openai' });
  try {
    const from = api.keys.length;
    const res = await f(`${base}/v1/chat/completions`, chat('malformed'));
    assert.equal(res.status, 400);
    assert.equal((await res.json()).error.message, "Invalid 'messages[0].content'.");
    assert.deepEqual(seen(from), ['sk-a', 'sk-b']);
    for (const name of ['a', 'b', 'c']) assert.equal(cell(pool, name), undefined, name);
    assert.equal(pool.stats().liveLeases, 0);
  } finally {
    await f.dispatcher.close();
  }
});

test('the openai SDK through `fetch: repute.fetch(pool, { kind })`: keys rotate under it, streams hold their key', async () => {
  const pool = keys('dead', 'ok');
  const f = repute.fetch(pool, { kind: 'openai' });
  const client = new OpenAI({ apiKey: 'sk-placeholder', baseURL: `${base}/v1`, fetch: f, maxRetries: 0 });
  try {
    const from = api.keys.length;
    const completion = await client.chat.completions.create({ model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }] });
    assert.equal(completion.choices[0].message.content, 'hello');
    assert.deepEqual(seen(from), ['sk-dead', 'sk-ok']);

    const stream = await client.chat.completions.create({
      model: 'gpt-test',
      messages: [{ role: 'user', content: 'hi' }],
      stream: true,
    });
    const parts = [];
    let held;
    for await (const chunk of stream) {
      if (parts.length === 0) {
        held = pool.stats().liveLeases;
        api.finishStream();
      }
      parts.push(chunk.choices[0].delta.content);
    }
    assert.equal(held, 1, 'the key is held while the SDK reads the stream');
    assert.deepEqual(parts, ['hel', 'lo']);
    await new Promise((ok) => setImmediate(ok));
    assert.equal(pool.stats().liveLeases, 0);
    assert.equal(cell(pool, 'ok').observations, 2);

    const refused = await client.chat.completions.create({ model: 'gpt-test', messages: [{ role: 'user', content: 'malformed' }] }).catch((e) => e);
    assert.ok(refused instanceof OpenAI.BadRequestError, String(refused));
    assert.equal(refused.status, 400);
  } finally {
    await f.dispatcher.close();
  }
});

test("Google's @google/genai SDK through `httpOptions: { fetch: repute.fetch(pool, { kind: 'gemini' }) }`", async () => {
  const pool = new Pool({ strategy: 'first' });
  for (const name of ['dead', 'spent', 'busy', 'ok']) pool.register('gemini', `g-${name}`, { secret: `sk-${name}` });
  const f = repute.fetch(pool, { kind: 'gemini', attempts: 4 });
  const ai = new GoogleGenAI({ apiKey: 'placeholder', httpOptions: { baseUrl: base, fetch: f } });
  try {
    const from = api.keys.length;
    const done = await ai.models.generateContent({ model: 'gemini-test', contents: 'hi' });
    assert.equal(done.text, 'hello from sk-ok');
    assert.deepEqual(seen(from), ['sk-dead', 'sk-spent', 'sk-busy', 'sk-ok'], 'x-goog-api-key carries each key');
    const [dead] = pool.resources().filter((r) => r.value === 'g-dead');
    assert.deepEqual(dead.block, { reason: 'auth_failed' }, "Google's 400 API_KEY_INVALID blocks the key everywhere");
    const spent = pool.cells('gemini', 'g-spent').find((c) => c.context === undefined);
    assert.equal(spent.cause, 'quota_exhausted', 'a spent day pauses the key everywhere');
    const busy = pool.cells('gemini', 'g-busy').find((c) => c.context === 'gemini-test');
    assert.equal(busy.cause, 'rate_limited');
    const wait = busy.coolingUntilMs - pool.now();
    assert.ok(wait > 15_000 && wait <= 20_000, `paused for the body's RetryInfo delay: ${wait} ms`);
    assert.equal(pool.stats().liveLeases, 0);
  } finally {
    await f.dispatcher.close();
  }
});
