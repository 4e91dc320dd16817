// One resource: its cells per context, its recent events as a timeline, and
// the actions (block, unblock, unregister), each confirmed first.

import { call, resourcePath } from './api.js';
import { h, replace, countdown, percent, badge, confirmAction } from './dom.js';
import { summarize, eventLine } from './views.js';

async function find(kind, value) {
  const query = new URLSearchParams({ kind, value, cells: 'true' });
  const { json } = await call('GET', `/v1/resources?${query}`);
  return json[0];
}

export async function resource(root, kind, value, store, go, say) {
  const r = await find(kind, value);
  if (!r) {
    replace(root, h('h1', { text: 'No such resource' }), h('p', {}, h('a', { href: '#/resources', text: 'Back to the resources' })));
    return;
  }
  const s = summarize(r);
  const who = `${kind} ${value}`;
  const act = async (question, method, path, body, done) => {
    if (!(await confirmAction(question))) return;
    try {
      await call(method, path, body);
      say(done, 'ok');
      if (method === 'DELETE' && path === resourcePath(kind, value)) go('#/resources');
      else go(location.hash, true);
    } catch (e) {
      say(`${e.problem?.title || 'Refused'}: ${e.message}`);
    }
  };
  const contexts = r.cells.filter((c) => c.context !== null).map((c) => c.context);
  const where = (select) => (select.value === '' ? 'everywhere' : `in ${select.value}`);
  const contextSelect = (name) => h('select', { name, 'aria-label': 'Where' },
    h('option', { value: '', text: 'everywhere' }), ...contexts.map((c) => h('option', { value: c, text: c })));
  const blockForm = h('form', { class: 'action', onsubmit: (e) => {
    e.preventDefault();
    const f = blockForm.elements;
    const body = { reason: f.reason.value || null, context: f.context.value || null, duration_ms: f.minutes.value ? Number(f.minutes.value) * 60000 : null };
    act(`Block ${who} ${where(f.context)}${f.minutes.value ? ` for ${f.minutes.value} min` : ' permanently'}?`, 'PUT', resourcePath(kind, value, '/block'), body, `Blocked ${who}.`);
  } },
  h('h3', { text: 'Block' }), contextSelect('context'),
  h('label', {}, 'Reason ', h('input', { name: 'reason', maxlength: 1024 })),
  h('label', {}, 'Minutes ', h('input', { name: 'minutes', type: 'number', min: 1, placeholder: 'permanent' })),
  h('button', { type: 'submit', class: 'danger', id: 'block', text: 'Block…' }));
  const unblockForm = h('form', { class: 'action', id: 'unblock-form', onsubmit: (e) => {
    e.preventDefault();
    const c = unblockForm.elements.context;
    const q = c.value ? `?${new URLSearchParams({ context: c.value })}` : '';
    act(`Lift the block of ${who} ${where(c)}?`, 'DELETE', resourcePath(kind, value, `/block${q}`), undefined, `Unblocked ${who}.`);
  } }, h('h3', { text: 'Unblock' }), contextSelect('context'), h('button', { type: 'submit', id: 'unblock', text: 'Unblock…' }));
  const unregisterForm = h('form', { class: 'action', onsubmit: (e) => {
    e.preventDefault();
    const force = unregisterForm.elements.force.checked;
    act(`Unregister ${who}${force ? ', revoking its leases' : ''}? This cannot be undone.`, 'DELETE', resourcePath(kind, value) + (force ? '?force=true' : ''), undefined, `Unregistered ${who}.`);
  } }, h('h3', { text: 'Unregister' }), h('label', {}, h('input', { type: 'checkbox', name: 'force' }), ' revoke live leases'),
  h('button', { type: 'submit', class: 'danger', id: 'unregister', text: 'Unregister…' }));

  const mine = store.events.filter((e) => { const id = e.data.resource || e.data.lease?.resource; return id && id.kind === kind && id.value === value; }).slice(-100).reverse();
  replace(root,
    h('p', {}, h('a', { href: '#/resources', text: '← Resources' })),
    h('h1', {}, h('span', { class: 'kind', text: kind }), ' ', h('span', { class: 'value', id: 'resource-value', text: value }), ' ', badge(s.state)),
    h('p', { class: 'labels' }, Object.entries(r.labels).map(([n, v]) => h('span', { class: 'label', text: `${n}=${v}` }))),
    h('p', {}, `score ${r.score} · uses ${r.uses} · permits ${r.permits} · leased ${r.leased}`, r.retired ? ` · retired (${r.retired})` : '',
      r.block ? [' · blocked: ', h('span', { class: 'reason', text: r.block.reason || 'no reason given' })] : ''),
    h('h2', { text: 'Cells' }),
    h('div', { class: 'scroll' }, h('table', { class: 'cells' },
      h('thead', {}, h('tr', {}, ...['Context', 'State', 'Score', 'Success', 'Latency', 'Observations', 'Cooling until', 'Cause', 'Block'].map((t) => h('th', { text: t })))),
      h('tbody', {}, r.cells.map((c) => h('tr', {},
        h('td', { 'data-label': 'Context', text: c.context ?? 'everywhere' }),
        h('td', { 'data-label': 'State' }, badge(c.state === 'blocklisted' ? 'blocked' : c.state)),
        h('td', { 'data-label': 'Score', class: 'num', text: c.score }),
        h('td', { 'data-label': 'Success', class: 'num', text: percent(c.success_rate) }),
        h('td', { 'data-label': 'Latency', class: 'num', text: `${Math.round(c.latency_ms)} ms` }),
        h('td', { 'data-label': 'Observations', class: 'num', text: c.observations }),
        h('td', { 'data-label': 'Cooling until' }, countdown(c.cooling_until_unix_ms)),
        h('td', { 'data-label': 'Cause', text: c.cause ?? '—' }),
        h('td', { 'data-label': 'Block', text: c.block ? (c.block.reason || 'blocked') : '—' })))))),
    h('h2', { text: 'Recent events' }),
    mine.length ? h('ol', { class: 'feed timeline' }, mine.map(eventLine)) : h('p', { class: 'muted', text: 'No events for this resource since this page opened.' }),
    h('h2', { text: 'Actions' }),
    h('div', { class: 'actions-row' }, blockForm, unblockForm, unregisterForm));
}
