// Building the page: every value goes in as text (textContent, attributes
// set one by one), never as HTML.

const SVG = 'http://www.w3.org/2000/svg';

/** An element with attributes and children; strings become text nodes. */
export function h(tag, attrs = {}, ...children) {
  const el = tag.startsWith('svg:') ? document.createElementNS(SVG, tag.slice(4)) : document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith('on')) el.addEventListener(name.slice(2), value);
    else if (name === 'text') el.textContent = String(value);
    else el.setAttribute(name, value === true ? '' : String(value));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

export function replace(el, ...children) {
  el.replaceChildren();
  append(el, children);
}

/** A number of ms as a short duration: 4m 05s, 1h 02m, 12s. */
export function duration(ms) {
  if (ms <= 0) return 'now';
  const s = Math.ceil(ms / 1000);
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${String(s % 60).padStart(2, '0')}s`;
  const hours = Math.floor(m / 60);
  if (hours < 48) return `${hours}h ${String(m % 60).padStart(2, '0')}m`;
  return `${Math.floor(hours / 24)}d`;
}

/** A live countdown to a Unix time in ms, updated by `tick`. */
export function countdown(untilMs) {
  if (untilMs === null || untilMs === undefined) return h('span', { class: 'muted', text: '—' });
  return h('time', { class: 'countdown', 'data-until': Math.round(untilMs), datetime: new Date(untilMs).toISOString(), text: duration(untilMs - Date.now()) });
}

/** Moves every countdown on the page to the present. */
export function tick() {
  const now = Date.now();
  for (const el of document.querySelectorAll('time.countdown')) {
    el.textContent = duration(Number(el.dataset.until) - now);
  }
}

export function percent(x) {
  return x === null || x === undefined ? '—' : `${(x * 100).toFixed(0)}%`;
}

export function badge(state) {
  return h('span', { class: `badge state-${state}`, text: state });
}

/** Asks in the page's own dialog; resolves true when confirmed. */
export function confirmAction(text) {
  const dialog = document.getElementById('confirm');
  document.getElementById('confirm-text').textContent = text;
  return new Promise((resolve) => {
    dialog.addEventListener('close', () => resolve(dialog.returnValue === 'ok'), { once: true });
    dialog.returnValue = 'cancel';
    dialog.showModal();
    document.getElementById('confirm-ok').focus();
  });
}
