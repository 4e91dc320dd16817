'use strict';
// Options, checked for type and converted to what the native module takes.

const native = require('../repute.node');
const { invalidArg, str, optStr, num, optNum, uint, optUint, bool, obj, optStrings, bigint, optBigint } = require('./checks');
const { ManualClock, kNative } = require('./clock');

/**
 * `{ kind, where, exclude, prefer, affinity, cost }`, checked for type, as the
 * native selector: `where` (label name to a value or an array of values)
 * becomes one label filter per name. The rules are the core's.
 */
function selectorOptions(o) {
  const rule = 'must be an object of label name to a string or an array of strings';
  let labels;
  if (o.where !== undefined && o.where !== null) {
    if (typeof o.where !== 'object' || Array.isArray(o.where)) throw invalidArg('where', rule);
    labels = Object.entries(o.where).map(([name, v]) => {
      const values = typeof v === 'string' ? [v] : v;
      if (!Array.isArray(values) || !values.every((s) => typeof s === 'string')) throw invalidArg('where', rule);
      return { name, values };
    });
  }
  return {
    kind: optStr('kind', o.kind),
    labels,
    exclude: optStrings('exclude', o.exclude),
    prefer: optStr('prefer', o.prefer),
    affinity: optStr('affinity', o.affinity),
    cost: optBigint('cost', o.cost),
  };
}

/** `register`'s `labels`: an object of label name to string. */
function labelsOption(v) {
  if (v === undefined || v === null) return undefined;
  const ok = typeof v === 'object' && !Array.isArray(v) && Object.values(v).every((s) => typeof s === 'string');
  if (!ok) throw invalidArg('labels', 'must be an object of label name to string');
  return v;
}

/** `register`'s `limits: { rpm, tpm, rpd, tpd, minIntervalMs, maxUses, maxAgeMs, perContext }`, checked for type; the rules are the core's. */
function limitsOption(v) {
  if (v === undefined || v === null) return undefined;
  const l = obj('limits', v);
  return {
    rpm: optUint('limits.rpm', l.rpm),
    tpm: optBigint('limits.tpm', l.tpm),
    rpd: optUint('limits.rpd', l.rpd),
    tpd: optBigint('limits.tpd', l.tpd),
    minIntervalMs: optNum('limits.minIntervalMs', l.minIntervalMs),
    maxUses: optBigint('limits.maxUses', l.maxUses),
    maxAgeMs: optNum('limits.maxAgeMs', l.maxAgeMs),
    perContext: contextLimitsOption(l.perContext),
  };
}

/** `limits.perContext: { rpm, tpm, minIntervalMs }`, checked for type. */
function contextLimitsOption(v) {
  if (v === undefined || v === null) return undefined;
  const l = obj('limits.perContext', v);
  return {
    rpm: optUint('limits.perContext.rpm', l.rpm),
    tpm: optBigint('limits.perContext.tpm', l.tpm),
    minIntervalMs: optNum('limits.perContext.minIntervalMs', l.minIntervalMs),
  };
}

/** `setGroup`'s limits: `{ rpm, tpm, rpd, tpd, concurrency, sharedQuota }`, checked for type; the rules are the core's. */
function groupLimitsOption(v) {
  const l = obj('limits', v);
  return {
    rpm: optUint('group.rpm', l.rpm),
    tpm: optBigint('group.tpm', l.tpm),
    rpd: optUint('group.rpd', l.rpd),
    tpd: optBigint('group.tpd', l.tpd),
    concurrency: optUint('group.concurrency', l.concurrency),
    sharedQuota: l.sharedQuota === undefined || l.sharedQuota === null ? false : bool('group.sharedQuota', l.sharedQuota),
  };
}

/** `{ autoRenew, maxHoldMs }`, checked for type; the rule is the host's. */
function holdOptions(options) {
  const o = obj('options', options);
  const autoRenew = o.autoRenew === undefined ? false : bool('autoRenew', o.autoRenew);
  const maxHoldMs = optNum('maxHoldMs', o.maxHoldMs);
  native.NativeLease.checkHold(autoRenew, maxHoldMs);
  return { autoRenew, maxHoldMs };
}

/** Response headers (fetch `Headers`, `Map`, plain object or pairs) as `[name, value]` string pairs. */
function headerPairs(headers) {
  const entries = typeof headers[Symbol.iterator] === 'function' ? headers : Object.entries(obj('headers', headers));
  const pairs = [];
  for (const pair of entries) {
    if (!Array.isArray(pair) || pair.length !== 2) throw invalidArg('headers', 'must be [name, value] pairs');
    pairs.push([String(pair[0]), String(pair[1])]);
  }
  return pairs;
}

/** `reportHttp`'s answer: the status, the headers as pairs and the body as text (a string, or bytes as UTF-8). */
function httpSpec(status, options) {
  const o = obj('options', options);
  const headers = o.headers === undefined || o.headers === null ? undefined : headerPairs(o.headers);
  let body;
  if (typeof o.body === 'string') body = o.body;
  else if (o.body instanceof Uint8Array) body = new TextDecoder().decode(o.body);
  else if (o.body !== undefined && o.body !== null) throw invalidArg('body', 'must be a string or a Uint8Array');
  return { status: uint('status', status), headers, body };
}

/** `profiles: { residential: 'proxy' }`, checked for shape; the names are the host's. */
function profiles(value) {
  const out = {};
  for (const [kind, profile] of Object.entries(obj('profiles', value))) {
    out[kind] = str('profiles', profile);
  }
  return out;
}

/** `cooldowns: { timeout: { baseMs, coolAfter, maxExponent } }`, checked for shape; the rules are the host's. */
function cooldowns(value) {
  const out = {};
  for (const [kind, rule] of Object.entries(obj('cooldowns', value))) {
    const r = obj(`cooldowns.${kind}`, rule);
    out[kind] = {
      baseMs: optNum('cooldowns.baseMs', r.baseMs),
      coolAfter: optUint('cooldowns.coolAfter', r.coolAfter),
      maxExponent: optUint('cooldowns.maxExponent', r.maxExponent),
    };
  }
  return out;
}

function nativeConfig(options) {
  const o = obj('options', options);
  const rateLimit = o.rateLimit === undefined || o.rateLimit === null ? undefined : obj('rateLimit', o.rateLimit);
  if (o.clock !== undefined && !(o.clock instanceof ManualClock)) throw invalidArg('clock', 'must be a ManualClock');
  const config = {
    store: o.store === undefined ? 'memory' : str('store', o.store),
    mode: optStr('mode', o.mode),
    ownerTtlMs: optNum('ownerTtlMs', o.ownerTtlMs),
    owners: optStr('owners', o.owners),
    tenant: o.tenant === undefined ? 'default' : str('tenant', o.tenant),
    leaseTtlMs: optNum('leaseTtlMs', o.leaseTtlMs),
    probeTtlMs: optNum('probeTtlMs', o.probeTtlMs),
    strategy: optStr('strategy', o.strategy),
    seed: o.seed === undefined || o.seed === null ? undefined : bigint('seed', o.seed),
    maxResources: optUint('maxResources', o.maxResources),
    maxCells: optUint('maxCells', o.maxCells),
    rateLimit: rateLimit && {
      rate: num('rateLimit.rate', rateLimit.rate),
      burst: uint('rateLimit.burst', rateLimit.burst),
    },
    renewMarginMs: optNum('renewMarginMs', o.renewMarginMs),
    recovery: optStr('recovery', o.recovery),
    failOpen: o.failOpen === undefined ? undefined : bool('failOpen', o.failOpen),
    cooldowns: o.cooldowns === undefined ? undefined : cooldowns(o.cooldowns),
    profiles: o.profiles === undefined ? undefined : profiles(o.profiles),
  };
  return [config, o.clock?.[kNative]];
}

module.exports = { selectorOptions, labelsOption, limitsOption, groupLimitsOption, holdOptions, headerPairs, httpSpec, nativeConfig };
