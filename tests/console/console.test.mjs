// The web console of `repute serve` in headless Chromium (Debian's package,
// driven by playwright-core; no browser is downloaded). run.sh starts the
// server and passes its address and two tenants' keys.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { chromium } from 'playwright-core';

const BASE = process.env.REPUTE_CONSOLE_URL;
const KEY = process.env.REPUTE_CONSOLE_KEY;
const BIG_KEY = process.env.REPUTE_CONSOLE_BIG_KEY;
const SHOTS = process.env.REPUTE_CONSOLE_SHOTS;
const OPEN = process.env.REPUTE_CONSOLE_OPEN_URL;
const XSS_VALUE = '<script>alert(1)</script>';
const XSS_LABEL = '<img src=x onerror=alert(1)>';

let browser;
let page;
/** Everything that would mean script ran or the page broke: dialogs, page errors, console errors. */
const trouble = [];

async function api(method, path, body, key = KEY) {
  const headers = { Authorization: `Bearer ${key}` };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const res = await fetch(BASE + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  return { status: res.status, headers: res.headers, json: text ? JSON.parse(text) : null };
}

async function register(kind, value, extra = {}, key = KEY) {
  const res = await api('POST', '/v1/resources', { kind, value, ...extra }, key);
  assert.equal(res.status, 204, JSON.stringify(res.json));
}

async function shot(name, target = page) {
  await target.screenshot({ path: `${SHOTS}/${name}.png`, fullPage: true });
}

/** A page with the key already entered (sessionStorage, as the sign-in form leaves it). */
async function signedIn(context, key) {
  const p = await context.newPage();
  await p.goto(`${BASE}/ui`);
  await p.fill('#key', key);
  await p.click('#signin button[type=submit]');
  await p.waitForSelector('#nav:not([hidden])');
  return p;
}

function watch(p) {
  p.on('dialog', (d) => { trouble.push(`dialog: ${d.message()}`); d.dismiss(); });
  p.on('pageerror', (e) => trouble.push(`page error: ${e.message}`));
  p.on('console', (m) => { if (m.type() === 'error') trouble.push(`console error: ${m.text()}`); });
}

function row(value) {
  return page.locator('table.resources tbody tr').filter({ has: page.locator('.value', { hasText: value }) });
}

before(async () => {
  assert.ok(BASE && OPEN && KEY && BIG_KEY && SHOTS, 'run.sh sets REPUTE_CONSOLE_URL, _OPEN_URL, _KEY, _BIG_KEY and _SHOTS');
  mkdirSync(SHOTS, { recursive: true });
  browser = await chromium.launch({
    executablePath: process.env.REPUTE_CHROMIUM || '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync'],
  });
  for (const value of ['10.0.0.1:8080', '10.0.0.2:8080', '10.0.0.3:8080']) {
    await register('proxy', value, { labels: { region: 'eu' } });
  }
  await register('openai', 'team-a', { secret: 'sk-never-shown-0123', limits: { rpm: 60, max_uses: 10 } });
  await register('proxy', XSS_VALUE, { labels: { note: XSS_LABEL, other: XSS_VALUE } });
  assert.equal((await api('PUT', `/v1/resources/proxy/${encodeURIComponent('10.0.0.3:8080')}/block`, { reason: XSS_LABEL })).status, 204);
  const lease = await api('POST', '/v1/leases', { kind: 'openai', context: 'api.openai.com' });
  assert.equal(lease.status, 201);
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  page = await signedIn(context, KEY);
  watch(page);
});

after(async () => {
  await browser?.close();
});

test('the table shows the registered resources with their states', async () => {
  await page.goto(`${BASE}/ui#/resources`);
  await row('10.0.0.1:8080').waitFor();
  const states = await page.$$eval('table.resources tbody tr', (rows) => rows.map((r) => [r.dataset.value, r.dataset.state]));
  assert.deepEqual(new Map(states), new Map([
    ['team-a', 'healthy'], ['10.0.0.1:8080', 'healthy'], ['10.0.0.2:8080', 'healthy'], ['10.0.0.3:8080', 'blocked'], [XSS_VALUE, 'healthy'],
  ]));
  assert.equal(await page.textContent('#page-info'), '1–5 of 5');
  assert.match(await row('team-a').textContent(), /uses 1\/10/);
  assert.ok(!(await page.content()).includes('sk-never-shown-0123'), 'the secret never reaches the page');
  await shot('resources');
});

test('a resource that cools shows its state and countdown without a reload', async () => {
  await page.evaluate(() => { window.stillThisPage = true; });
  for (let i = 0; i < 4; i++) {
    const res = await api('POST', '/v1/outcomes', { kind: 'proxy', value: '10.0.0.2:8080', context: 'example.com', outcome: 'timeout' });
    assert.equal(res.status, 204);
  }
  await page.locator('table.resources tbody tr[data-value="10.0.0.2:8080"][data-state="cooling"]').waitFor();
  const countdown = row('10.0.0.2:8080').locator('td.cooling time.countdown');
  const first = await countdown.textContent();
  assert.match(first, /^\d+(m \d\ds|s)$/);
  await page.waitForFunction((before) => document.querySelector('tr[data-value="10.0.0.2:8080"] td.cooling time').textContent !== before, first);
  assert.equal(await page.evaluate(() => window.stillThisPage), true, 'no reload');
});

test('blocking from the page asks first, and the API sees the block', async () => {
  await page.click(`a[href="#/resource/proxy/${encodeURIComponent('10.0.0.1:8080')}"]`);
  await page.waitForSelector('#block');
  await page.fill('form.action input[name=reason]', 'flaky exit node');
  await page.click('#block');
  await page.waitForSelector('dialog#confirm[open]');
  assert.match(await page.textContent('#confirm-text'), /Block proxy 10\.0\.0\.1:8080 everywhere permanently\?/);
  await shot('confirm');
  await page.click('#confirm-ok');
  await page.waitForSelector('.message.ok');
  const { json } = await api('GET', '/v1/resources?kind=proxy');
  const blocked = json.find((r) => r.resource.value === '10.0.0.1:8080');
  assert.deepEqual(blocked.block, { reason: 'flaky exit node', until_unix_ms: null });
  await page.waitForSelector('h1 .badge.state-blocked');
  await shot('resource');
});

/** Opens the confirmation dialog by Enter on `selector`, pressing again
 * only while no dialog is open: the page re-renders after an action, and
 * a key sent to the element it replaced goes nowhere. */
async function confirmByKeyboard(selector) {
  for (let i = 0; i < 20; i++) {
    if (await page.$('dialog#confirm[open]')) return;
    await page.focus(selector);
    await page.keyboard.press('Enter');
    try {
      await page.waitForSelector('dialog#confirm[open]', { timeout: 1500 });
      return;
    } catch {
      // Pressed on an element the re-render replaced: press again.
    }
  }
  throw new Error(`no confirmation dialog from ${selector}`);
}

test('unblocking in one context and unregistering, by keyboard, each confirmed or called off', async () => {
  const path = `/v1/resources/proxy/${encodeURIComponent('10.0.0.2:8080')}`;
  assert.equal((await api('PUT', `${path}/block`, { context: 'example.com', reason: 'bad site' })).status, 204);
  await page.goto(`${BASE}/ui#/resource/proxy/${encodeURIComponent('10.0.0.2:8080')}`);
  await page.waitForSelector('table.cells');
  await page.selectOption('#unblock-form select', 'example.com');
  await confirmByKeyboard('#unblock');
  assert.equal(await page.textContent('#confirm-text'), 'Lift the block of proxy 10.0.0.2:8080 in example.com?');
  await page.keyboard.press('Enter');
  // The page's message may still be an earlier action's: wait for the API.
  let block;
  for (let i = 0; i < 100; i++) {
    block = (await api('GET', `${path}/cells`)).json.find((c) => c.context === 'example.com').block;
    if (block === null) break;
    await new Promise((ok) => setTimeout(ok, 50));
  }
  assert.equal(block, null);

  await confirmByKeyboard('#unregister');
  await page.keyboard.press('Escape');
  await page.waitForSelector('dialog#confirm', { state: 'hidden' });
  assert.equal((await api('GET', '/v1/resources?kind=proxy&value=10.0.0.2%3A8080')).json.length, 1, 'called off: still there');
  await confirmByKeyboard('#unregister');
  await page.click('#confirm-ok');
  await page.waitForSelector('table.resources');
  assert.equal((await api('GET', '/v1/resources?kind=proxy&value=10.0.0.2%3A8080')).json.length, 0);
  assert.deepEqual(trouble, []);
});

test('values a client registered are shown as text and never run', async () => {
  await page.goto(`${BASE}/ui#/resource/proxy/${encodeURIComponent(XSS_VALUE)}`);
  await page.waitForSelector('#resource-value');
  assert.equal(await page.textContent('#resource-value'), XSS_VALUE);
  assert.ok((await page.textContent('p.labels')).includes(`note=${XSS_LABEL}`));
  await page.goto(`${BASE}/ui#/resources`);
  await row('10.0.0.3:8080').waitFor();
  assert.equal(await row('10.0.0.3:8080').locator('.reason').textContent(), XSS_LABEL);
  await page.goto(`${BASE}/ui#/events`);
  await page.waitForSelector('#feed li');
  assert.equal(await page.locator('#view img, #view script').count(), 0);
  await shot('events');
  assert.deepEqual(trouble, []);
});

test('the overview and the live leases', async () => {
  await api('POST', '/v1/leases', { kind: 'proxy', context: 'nothing-free.example' });
  assert.equal((await api('POST', '/v1/leases', { kind: 'unknown-kind', context: 'example.com' })).status, 409);
  await page.goto(`${BASE}/ui#/overview`);
  await page.waitForSelector('.cards .figure');
  const figures = await page.$$eval('.card', (cards) => Object.fromEntries(cards.map((c) => [c.lastChild.textContent, c.firstChild.textContent])));
  assert.equal(figures.blocked, '2');
  assert.equal(figures.healthy, '2');
  assert.equal(figures['live leases'], '2');
  assert.equal(await page.locator('svg.chart polyline').count(), 2);
  await page.waitForFunction(() => /no_candidates: 1/.test(document.querySelector('#view').textContent));
  await shot('overview');
  await page.goto(`${BASE}/ui#/leases`);
  await page.waitForSelector('table.leases tbody tr');
  const text = await page.textContent('table.leases');
  assert.match(text, /team-a/);
  assert.doesNotMatch(text, /sk-never-shown/);
  await shot('leases');
  await page.setViewportSize({ width: 390, height: 844 });
  await page.goto(`${BASE}/ui#/resources`);
  await row('10.0.0.1:8080').waitFor();
  await shot('resources-phone');
  await page.setViewportSize({ width: 1280, height: 800 });
  assert.deepEqual(trouble, []);
});

test('limits show the current window as usage bars, and a resource at its tpm counts over a limit', async () => {
  await register('anthropic', 'team-b', { permits: 3, limits: { tpm: 3 } });
  for (let i = 0; i < 3; i++) {
    assert.equal((await api('POST', '/v1/leases', { kind: 'anthropic', context: 'api.anthropic.com' })).status, 201);
  }
  await page.goto(`${BASE}/ui#/overview`);
  await page.waitForSelector('#over-a-limit');
  assert.equal(await page.textContent('#over-a-limit'), '1');
  await page.goto(`${BASE}/ui#/resources`);
  await row('team-b').waitFor();
  assert.match(await row('team-b').textContent(), /tpm 3\/3/);
  assert.match(await row('team-a').textContent(), /rpm 1\/60/);
  assert.equal(await row('team-b').locator('meter[aria-label=tpm]').getAttribute('value'), '3');
  await shot('usage');
  assert.deepEqual(trouble, []);
});

test('a wrong key gets a clear message', async () => {
  const context = await browser.newContext();
  const p = await context.newPage();
  p.on('dialog', (d) => { trouble.push(`dialog: ${d.message()}`); d.dismiss(); });
  p.on('pageerror', (e) => trouble.push(`page error: ${e.message}`));
  await p.goto(`${BASE}/ui`);
  await p.fill('#key', 'rpt_00000000000000000000000000000000');
  await p.press('#key', 'Enter');
  await p.waitForSelector('#message:not([hidden])');
  assert.match(await p.textContent('#message'), /API key was not accepted/);
  assert.equal(await p.isVisible('#key'), true);
  assert.equal(await p.evaluate(() => sessionStorage.length), 0, 'a refused key is not kept');
  await shot('wrong-key', p);
  await context.close();
  assert.deepEqual(trouble, []);
});

test('without auth a browser at / gets the console, which asks for a tenant and sends it', async () => {
  const res = await fetch(`${OPEN}/v1/resources`, {
    method: 'POST', headers: { 'Content-Type': 'application/json', 'Repute-Tenant': 'acme' }, body: JSON.stringify({ kind: 'proxy', value: 'acme-exit:3128' }),
  });
  assert.equal(res.status, 204);
  const context = await browser.newContext();
  const p = await context.newPage();
  watch(p);
  await p.goto(`${OPEN}/`);
  assert.equal(new URL(p.url()).pathname, '/ui');
  await p.waitForSelector('#tenant', { state: 'visible' });
  assert.equal(await p.isVisible('#key'), false);
  await p.fill('#tenant', 'acme');
  await p.press('#tenant', 'Enter');
  await p.click('#nav a[data-view=resources]');
  await p.waitForSelector('table.resources tbody tr[data-value="acme-exit:3128"]');
  assert.equal(await p.locator('table.resources tbody tr').count(), 1);
  assert.match(await p.textContent('#who'), /tenant acme/);
  await context.close();
  assert.deepEqual(trouble, []);
});

test('a tenant of 10,000 resources: the first render', async () => {
  const values = Array.from({ length: 10000 }, (_, i) => `10.1.${Math.floor(i / 250)}.${i % 250}:3128`);
  for (let i = 0; i < values.length; i += 50) {
    await Promise.all(values.slice(i, i + 50).map((v) => register('proxy', v, { labels: { pool: `p${i % 7}` } }, BIG_KEY)));
  }
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const p = await signedIn(context, BIG_KEY);
  watch(p);
  const timed = async (hash, selector) => {
    // A new document each time, so the page's clock starts with this navigation.
    await p.goto('about:blank');
    const start = Date.now();
    await p.goto(`${BASE}/ui${hash}`);
    await p.waitForSelector(selector);
    await p.waitForFunction(() => document.body.dataset.drawn);
    return { page: Number(await p.evaluate(() => document.body.dataset.drawn)), seen: Date.now() - start };
  };
  const table = await timed('#/resources', 'table.resources tbody tr:nth-child(50)');
  assert.equal(await p.textContent('#page-info'), '1–50 of 10000');
  const overview = await timed('#/overview', '.cards .figure');
  assert.equal(await p.textContent('.card.state-healthy .figure'), '10000');
  // Timings are printed, not asserted: `page` is from the navigation's start to the drawn view, as the page measures it.
  console.log(`first render with 10,000 resources: resources table ${table.page} ms (${table.seen} ms seen by the test), `
    + `overview ${overview.page} ms (${overview.seen} ms)`);
  await context.close();
  assert.deepEqual(trouble, []);
});
