// The overview, the resources table, the live leases and the event feed.

import { call } from './api.js';
import { h, replace, countdown, percent, badge, duration } from './dom.js';

export const STATES = ['healthy', 'recovering', 'cooling', 'blocked', 'retired'];
const PAGE = 50;

/** A resource's state and figures, from its view and its cells. */
export function summarize(r) {
  const cells = r.cells || [];
  const global = cells.find((c) => c.context === null) || {};
  const cooling = cells.filter((c) => c.state === 'cooling' && c.cooling_until_unix_ms);
  const coolingUntil = cooling.length ? Math.min(...cooling.map((c) => c.cooling_until_unix_ms)) : null;
  let state = 'healthy';
  if (r.retired) state = 'retired';
  else if (r.block || global.state === 'blocklisted') state = 'blocked';
  else if (cooling.length || cells.some((c) => c.state === 'cooling')) state = 'cooling';
  else if (cells.some((c) => c.state === 'recovering' || c.half_open)) state = 'recovering';
  const blockedIn = cells.filter((c) => c.context !== null && c.state === 'blocklisted').map((c) => c.context);
  return { state, coolingUntil, global, blockedIn };
}

/** Whether a resource's current window reached its rpm or its tpm (the API's `usage`, counted by the lease authority). */
export function overLimit(r) {
  const l = r.limits || {};
  const u = r.usage;
  return !r.retired && !!u && ((!!l.rpm && u.grants >= l.rpm) || (!!l.tpm && u.tokens >= l.tpm));
}

export function resourceHref(kind, value) {
  return `#/resource/${encodeURIComponent(kind)}/${encodeURIComponent(value)}`;
}

function usageBar(used, max, label) {
  const share = Math.min(1, used / max);
  return h('div', { class: 'usage', title: `${label}: ${used} of ${max}` },
    h('span', { class: 'usage-label', text: `${label} ${used}/${max}` }),
    h('meter', { min: 0, max, value: Math.min(used, max), 'aria-label': label, class: share >= 0.9 ? 'high' : '' }));
}

function limitsCell(r) {
  const l = r.limits || {};
  const parts = [];
  if (l.max_uses) parts.push(usageBar(r.uses, l.max_uses, 'uses'));
  // The current 60 s window against each of its limits.
  if (l.rpm) parts.push(r.usage ? usageBar(r.usage.grants, l.rpm, 'rpm') : h('span', { class: 'limit', text: `rpm ≤ ${l.rpm}` }));
  if (l.tpm) parts.push(r.usage ? usageBar(r.usage.tokens, l.tpm, 'tpm') : h('span', { class: 'limit', text: `tpm ≤ ${l.tpm}` }));
  if (l.min_interval_ms) parts.push(h('span', { class: 'limit', text: `gap ≥ ${duration(l.min_interval_ms)}` }));
  if (l.max_age_ms) parts.push(h('span', { class: 'limit', text: `age ≤ ${duration(l.max_age_ms)}` }));
  return parts.length ? parts : h('span', { class: 'muted', text: '—' });
}

function blockCell(r, s) {
  if (r.block) {
    const until = r.block.until_unix_ms;
    return h('span', {}, h('span', { class: 'reason', text: r.block.reason || 'blocked' }), until ? [' · ', countdown(until)] : ' · permanent');
  }
  if (s.blockedIn.length) return h('span', { class: 'reason', text: `in ${s.blockedIn.join(', ')}` });
  return h('span', { class: 'muted', text: '—' });
}

/** Every resource of the tenant with its cells: the first thousand, then the other pages at once. */
async function allResources() {
  const page = (offset) => call('GET', `/v1/resources?cells=true&limit=1000&offset=${offset}`);
  const first = await page(0);
  const total = Number(first.headers.get('Repute-Total'));
  const offsets = [];
  for (let offset = 1000; offset < total; offset += 1000) offsets.push(offset);
  const rest = await Promise.all(offsets.map(page));
  return [first, ...rest].flatMap((p) => p.json);
}

function chart(buckets) {
  const width = 300, height = 80, now = Math.floor(Date.now() / 1000);
  const seconds = Array.from({ length: width }, (_, i) => buckets.get(now - width + 1 + i) || { grants: 0, refusals: 0 });
  const top = Math.max(1, ...seconds.map((b) => Math.max(b.grants, b.refusals)));
  const line = (key) => seconds.map((b, i) => `${i},${(height - (b[key] / top) * (height - 4)).toFixed(1)}`).join(' ');
  return h('figure', { class: 'chart-box' },
    h('svg:svg', { viewBox: `0 0 ${width} ${height}`, preserveAspectRatio: 'none', class: 'chart', role: 'img', 'aria-label': 'Grants and refusals per second, last 5 minutes' },
      h('svg:polyline', { points: line('grants'), class: 'grants' }),
      h('svg:polyline', { points: line('refusals'), class: 'refusals' })),
    h('figcaption', { class: 'muted', text: `last 5 minutes, top of the chart ${top}/s` }));
}

export async function overview(root, store) {
  const [{ json: stats }, list] = await Promise.all([call('GET', '/v1/stats'), allResources()]);
  const counts = Object.fromEntries(STATES.map((s) => [s, 0]));
  let soonest = null;
  let limited = 0;
  for (const r of list) {
    const s = summarize(r);
    counts[s.state] += 1;
    if (overLimit(r)) limited += 1;
    for (const t of [s.coolingUntil, r.block && r.block.until_unix_ms]) {
      if (t && t > Date.now() && (soonest === null || t < soonest)) soonest = t;
    }
  }
  const reasons = Object.entries(store.reasons).sort((a, b) => b[1] - a[1]);
  const recent = [...store.buckets.entries()].filter(([s]) => s > Date.now() / 1000 - 60);
  const sum = (k) => recent.reduce((n, [, b]) => n + b[k], 0);
  replace(root,
    h('h1', { text: 'Overview' }),
    h('div', { class: 'cards' },
      ...STATES.map((s) => h('a', { class: `card state-${s}`, href: '#/resources', 'data-state': s },
        h('span', { class: 'figure', text: counts[s] }), h('span', { text: s }))),
      h('a', { class: 'card state-limited', href: '#/resources', title: 'Resources whose window of the last 60 s reached their rpm or tpm, whatever their state' },
        h('span', { class: 'figure', id: 'over-a-limit', text: limited }), h('span', { text: 'over a limit' })),
      h('a', { class: 'card', href: '#/leases' }, h('span', { class: 'figure', id: 'live-leases', text: stats.live_leases }), h('span', { text: 'live leases' }))),
    h('section', { class: 'panel' },
      h('h2', { text: 'Grants and refusals per second' }),
      chart(store.buckets),
      h('p', { class: 'legend' }, h('span', { class: 'grants', text: `grants ${(sum('grants') / 60).toFixed(2)}/s` }), ' · ',
        h('span', { class: 'refusals', text: `refusals ${(sum('refusals') / 60).toFixed(2)}/s` }), ' (last minute, since this page opened)')),
    h('section', { class: 'panel' },
      h('h2', { text: 'Refusal reasons' }),
      reasons.length ? h('ul', {}, ...reasons.map(([reason, n]) => h('li', { text: `${reason}: ${n}` }))) : h('p', { class: 'muted', text: 'No refusals seen since this page opened.' }),
      h('p', {}, 'Soonest retry: ', soonest ? countdown(soonest) : h('span', { class: 'muted', text: 'nothing is cooling or blocked for a while' }))));
}

export async function resources(root, params, go) {
  const offset = Number(params.get('offset') || 0);
  const sort = params.get('sort') || 'id';
  const query = new URLSearchParams({ cells: 'true', limit: PAGE, offset, sort });
  if (params.get('kind')) query.set('kind', params.get('kind'));
  if (params.get('label')) query.set('label', params.get('label'));
  const { json: list, headers } = await call('GET', `/v1/resources?${query}`);
  const total = Number(headers.get('Repute-Total'));
  const set = (changes) => {
    const next = new URLSearchParams(params);
    for (const [k, v] of Object.entries(changes)) { if (v === '' || v === null) next.delete(k); else next.set(k, v); }
    go(`#/resources?${next}`);
  };
  const sortButton = (key, label) => {
    const state = sort === key ? 'ascending' : sort === `-${key}` ? 'descending' : 'none';
    return h('th', { 'aria-sort': state }, h('button', { type: 'button', class: 'sort', onclick: () => set({ sort: sort === key ? `-${key}` : key, offset: 0 }) },
      label, state === 'ascending' ? ' ▲' : state === 'descending' ? ' ▼' : ''));
  };
  const form = h('form', { class: 'filters', onsubmit: (e) => { e.preventDefault(); set({ kind: form.elements.kind.value.trim(), label: form.elements.label.value.trim(), offset: 0 }); } },
    h('label', {}, 'Kind ', h('input', { name: 'kind', value: params.get('kind') || '', placeholder: 'proxy' })),
    h('label', {}, 'Label ', h('input', { name: 'label', value: params.get('label') || '', placeholder: 'region=eu' })),
    h('button', { type: 'submit', text: 'Filter' }));
  const rows = list.map((r) => {
    const s = summarize(r);
    const { kind, value } = r.resource;
    const labels = Object.entries(r.labels || {}).map(([n, v]) => h('span', { class: 'label', text: `${n}=${v}` }));
    return h('tr', { 'data-kind': kind, 'data-value': value, 'data-state': s.state },
      h('td', { 'data-label': 'Resource' }, h('a', { href: resourceHref(kind, value) }, h('span', { class: 'kind', text: kind }), ' ', h('span', { class: 'value', text: value })), h('div', { class: 'labels' }, labels)),
      h('td', { 'data-label': 'State' }, badge(s.state)),
      h('td', { 'data-label': 'Score', class: 'num', text: r.score }),
      h('td', { 'data-label': 'Success', class: 'num', text: percent(s.global.success_rate) }),
      h('td', { 'data-label': 'Latency', class: 'num', text: s.global.latency_ms ? `${Math.round(s.global.latency_ms)} ms` : '—' }),
      h('td', { 'data-label': 'Uses', class: 'num', text: r.uses }),
      h('td', { 'data-label': 'Cooling', class: 'cooling' }, countdown(s.coolingUntil)),
      h('td', { 'data-label': 'Block' }, blockCell(r, s)),
      h('td', { 'data-label': 'Limits' }, limitsCell(r)),
      h('td', { 'data-label': 'Retired', text: r.retired || '—' }));
  });
  const first = total ? offset + 1 : 0;
  replace(root,
    h('h1', { text: 'Resources' }),
    form,
    h('div', { class: 'scroll' }, h('table', { class: 'resources' },
      h('thead', {}, h('tr', {}, sortButton('id', 'Resource'), h('th', { text: 'State' }), sortButton('score', 'Score'), h('th', { text: 'Success' }),
        h('th', { text: 'Latency' }), sortButton('uses', 'Uses'), h('th', { text: 'Cooling until' }), h('th', { text: 'Block' }), h('th', { text: 'Limits' }), h('th', { text: 'Retired' }))),
      h('tbody', {}, rows))),
    h('nav', { class: 'pager', 'aria-label': 'Pages' },
      h('button', { type: 'button', disabled: offset <= 0, onclick: () => set({ offset: Math.max(0, offset - PAGE) }), text: '← Previous' }),
      h('span', { id: 'page-info', text: `${first}–${offset + list.length} of ${total}` }),
      h('button', { type: 'button', disabled: offset + PAGE >= total, onclick: () => set({ offset: offset + PAGE }), text: 'Next →' })));
}

export async function leases(root) {
  const { json } = await call('GET', '/v1/leases');
  replace(root,
    h('h1', { text: 'Live leases' }),
    json.length === 0 ? h('p', { class: 'muted', text: 'No live leases.' }) :
      h('div', { class: 'scroll' }, h('table', { class: 'leases' },
        h('thead', {}, h('tr', {}, ...['Lease', 'Resource', 'Context', 'Kind', 'Permit', 'Expires in'].map((t) => h('th', { text: t })))),
        h('tbody', {}, json.map((l) => h('tr', {},
          h('td', { 'data-label': 'Lease', text: l.id }),
          h('td', { 'data-label': 'Resource' }, h('a', { href: resourceHref(l.kind, l.value) }, `${l.kind} `, h('span', { class: 'value', text: l.value }))),
          h('td', { 'data-label': 'Context', text: l.context ?? '—' }),
          h('td', { 'data-label': 'Kind', text: l.lease_kind }),
          h('td', { 'data-label': 'Permit', class: 'num', text: l.permit }),
          h('td', { 'data-label': 'Expires in' }, countdown(Date.now() + l.expires_in_ms))))))));
}

/** One line of the feed: the event's type, time and its fields as text. */
export function eventLine(e) {
  const { type, at_unix_ms: at, resource, lease, ...rest } = e.data;
  const id = resource || lease?.resource;
  const fields = [];
  if (id) fields.push(`${id.kind} ${id.value}`);
  if (lease) fields.push(`lease ${lease.id}`, `context=${lease.context}`);
  for (const [k, v] of Object.entries(rest)) {
    if (v === null) continue;
    if (k.endsWith('_unix_ms')) fields.push(`${k.slice(0, -8)}=${new Date(v).toLocaleTimeString()}`);
    else fields.push(`${k}=${typeof v === 'object' ? JSON.stringify(v) : v}`);
  }
  return h('li', { class: `event event-${e.name}` },
    h('time', { text: new Date(at || e.received).toLocaleTimeString() }), ' ',
    h('span', { class: 'event-name', text: e.name }), ' ',
    h('span', { class: 'event-fields', text: fields.join(' ') }));
}

export function feed(root, store) {
  const list = h('ol', { class: 'feed', id: 'feed' }, store.events.slice().reverse().slice(0, 300).map(eventLine));
  replace(root, h('h1', { text: 'Events' }),
    h('p', { class: 'muted', id: 'stream-state', text: store.connected ? 'Live: new events appear at the top.' : 'Connecting to the event stream…' }),
    list);
}
