// The console: signs in (a key, or with auth off a tenant), follows the
// event stream, and draws the view the address's #fragment names.

import { auth, call, events, ApiError } from './api.js';
import { tick } from './dom.js';
import { overview, resources, leases, feed, eventLine } from './views.js';
import { resource } from './resource.js';

const $ = (id) => document.getElementById(id);
const store = { events: [], buckets: new Map(), reasons: {}, connected: false };
let stream = null;
let openAuth = false;
let drawing = null;
let again = false;

function say(text, tone = 'error') {
  const m = $('message');
  m.textContent = text;
  m.className = `message ${tone}`;
  m.hidden = !text;
}

function explain(e) {
  if (e instanceof ApiError && e.status === 401) {
    return auth.key ? 'That API key was not accepted: the server knows no such key. Check it, or make one with `repute key new --tenant NAME`.'
      : 'This server wants an API key.';
  }
  if (e instanceof ApiError) return `${e.problem.title || 'Refused'}: ${e.message}`;
  return `The server could not be reached (${e.message}).`;
}

function showSignin(message) {
  stream?.abort();
  stream = null;
  $('nav').hidden = true;
  $('signout').hidden = true;
  $('who').textContent = '';
  $('view').replaceChildren();
  $('signin').hidden = false;
  $('key-row').hidden = openAuth;
  $('tenant-row').hidden = !openAuth;
  $('signin-help').hidden = openAuth;
  if (message) say(message);
  (openAuth ? $('tenant') : $('key')).focus();
}

function count(name, data) {
  const second = Math.floor((data.at_unix_ms || Date.now()) / 1000);
  const b = store.buckets.get(second) || { grants: 0, refusals: 0 };
  if (name === 'leased') b.grants += 1;
  if (name === 'rejected') {
    b.refusals += 1;
    const reason = data.reason || 'unknown';
    store.reasons[reason] = (store.reasons[reason] || 0) + 1;
  }
  store.buckets.set(second, b);
  for (const s of store.buckets.keys()) if (s < second - 600) store.buckets.delete(s);
}

function onEvent(name, text) {
  let data = {};
  try { data = JSON.parse(text); } catch { data = { value: text }; }
  const e = { name, data, received: Date.now() };
  store.events.push(e);
  if (store.events.length > 2000) store.events.splice(0, store.events.length - 2000);
  count(name, data);
  const list = $('feed');
  if (list) {
    list.prepend(eventLine(e));
    while (list.children.length > 300) list.lastChild.remove();
  } else {
    schedule();
  }
}

let timer = null;
let lastDrawMs = 0;
/**
 * Redraws the view soon: at most twice a second while events pour in, and
 * less often for a view that is slow to fetch (the overview of a large pool).
 */
function schedule() {
  if (timer) return;
  timer = setTimeout(() => {
    timer = null;
    // Not under someone answering the confirmation, typing in a form or
    // moving through the view with the keyboard: a redraw would lose their place.
    if ($('confirm').open || $('view').contains(document.activeElement)) schedule();
    else draw();
  }, Math.max(500, 4 * lastDrawMs));
}

async function draw() {
  if (drawing) { again = true; return drawing; }
  drawing = (async () => {
    const hash = location.hash || '#/overview';
    const [path, query] = hash.slice(1).split('?');
    const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
    const params = new URLSearchParams(query || '');
    const root = $('view');
    const began = performance.now();
    for (const a of document.querySelectorAll('#nav a')) {
      const current = a.dataset.view === parts[0] || (parts[0] === 'resource' && a.dataset.view === 'resources');
      if (current) a.setAttribute('aria-current', 'page'); else a.removeAttribute('aria-current');
    }
    try {
      if (parts[0] === 'resources') await resources(root, params, go);
      else if (parts[0] === 'resource' && parts.length === 3) await resource(root, parts[1], parts[2], store, go, say);
      else if (parts[0] === 'leases') await leases(root);
      else if (parts[0] === 'events') feed(root, store);
      else await overview(root, store);
      document.body.dataset.view = parts[0] || 'overview';
      // ms since navigation began: when the view's data was last on the page.
      document.body.dataset.drawn = String(Math.round(performance.now()));
      lastDrawMs = performance.now() - began;
    } catch (e) {
      if (e instanceof ApiError && e.status === 401) { auth.clear(); showSignin(explain(e)); return; }
      say(explain(e));
    }
  })();
  await drawing;
  drawing = null;
  if (again) { again = false; draw(); }
}

function go(hash, redraw = false) {
  if (location.hash === hash || redraw) draw();
  else location.hash = hash;
}

async function start() {
  $('signin').hidden = true;
  $('nav').hidden = false;
  $('signout').hidden = false;
  $('who').textContent = openAuth ? `tenant ${auth.tenant || 'default'} (no auth)` : 'signed in with a key';
  stream = new AbortController();
  events(onEvent, (up, err) => {
    store.connected = up;
    const state = $('stream-state');
    if (state) state.textContent = up ? 'Live: new events appear at the top.' : 'Reconnecting to the event stream…';
    if (err) { auth.clear(); showSignin(explain(err)); }
  }, stream.signal);
  await draw();
}

/** Checks the key (or the open server) with one call before showing anything. */
async function signIn() {
  try {
    await call('GET', '/v1/stats');
    say('');
    await start();
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) {
      const message = auth.key ? explain(e) : '';
      auth.clear();
      showSignin(message);
    } else {
      showSignin(explain(e));
    }
  }
}

async function boot() {
  if (!auth.key) {
    // An open server (--no-auth) answers without a key: then a tenant is asked for instead.
    try {
      await call('GET', '/v1/stats');
      openAuth = true;
    } catch {
      openAuth = false;
    }
  }
  $('signin').addEventListener('submit', (e) => {
    e.preventDefault();
    if (openAuth) auth.set(null, $('tenant').value.trim() || 'default');
    else auth.set($('key').value.trim(), null);
    $('key').value = '';
    signIn();
  });
  $('signout').addEventListener('click', () => { auth.clear(); say('Signed out.', 'ok'); showSignin(); });
  window.addEventListener('hashchange', () => draw());
  $('nav').addEventListener('click', () => say(''));
  setInterval(tick, 1000);
  setInterval(() => { if (!$('signin').hidden || document.body.dataset.view === 'events') return; schedule(); }, 5000);
  if (auth.key || (openAuth && auth.tenant)) await signIn();
  else showSignin();
}

boot();
