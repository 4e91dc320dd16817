// Choosing among resources: labels and `where`, `kind`, `exclude`, `prefer`
// and `affinity`, on tryAcquire, acquire and withLease alike. The pools
// select with the `first` strategy, so the resource an acquire gets is exact.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { Pool, ManualClock, InvalidInputError, NoResourceAvailableError } from 'repute';

function keys() {
  const pool = new Pool({ clock: new ManualClock(), strategy: 'first' });
  pool.register('api-key', 'k1', { labels: { region: 'eu', tier: 'free' } });
  pool.register('api-key', 'k2', { labels: { tier: 'paid', region: 'us' } });
  pool.register('api-key', 'k3', { labels: { region: 'eu', tier: 'paid' } });
  pool.register('proxy', 'p1', { labels: { region: 'eu' } });
  return pool;
}

/** The lease's value, and the lease released. */
function value(lease) {
  if (lease === null) return null;
  lease.release();
  return lease.value;
}

test('labels are part of the resource view', () => {
  const pool = keys();
  pool.register('api-key', 'k4');
  assert.deepEqual(Object.fromEntries(pool.resources().map((r) => [r.value, r.labels])), {
    k1: { region: 'eu', tier: 'free' },
    k2: { region: 'us', tier: 'paid' },
    k3: { region: 'eu', tier: 'paid' },
    k4: {},
    p1: { region: 'eu' },
  });
  assert.deepEqual(Object.keys(pool.resources().find((r) => r.value === 'k2').labels), ['region', 'tier']);
  assert.equal(pool.register('api-key', 'k2', { labels: { tier: 'free' } }), true, 'registering again replaces them');
  assert.equal(pool.register('api-key', 'k2', { labels: { tier: 'free' } }), false);
  assert.deepEqual(pool.resources().find((r) => r.value === 'k2').labels, { tier: 'free' });
  pool.close();
});

test('where admits resources whose labels match every filter', async () => {
  const pool = keys();
  assert.equal(value(pool.tryAcquire('c', { where: { tier: 'paid' } })), 'k2');
  assert.equal(value(pool.tryAcquire('c', { where: { tier: 'paid', region: 'eu' } })), 'k3');
  assert.equal(value(pool.tryAcquire('c', { where: { region: ['us', 'asia'] } })), 'k2');
  assert.equal(value(pool.tryAcquire('c', { where: { region: ['asia', 'eu'], tier: ['free', 'paid'] } })), 'k1');
  assert.equal(pool.tryAcquire('c', { where: { region: 'asia' } }), null);
  assert.equal(pool.tryAcquire('c', { where: { zone: 'a' } }), null, 'a resource without the label never matches');
  const held = await pool.acquire('c', { where: { tier: 'paid', region: 'eu' } });
  assert.equal(held.value, 'k3');
  await assert.rejects(pool.acquire('c', { timeoutMs: 0, where: { tier: 'paid', region: 'eu' } }), NoResourceAvailableError);
  await held.release();
  pool.close();
});

test('kind admits resources of that kind only', async () => {
  const pool = keys();
  assert.equal(value(pool.tryAcquire('c', { kind: 'proxy' })), 'p1');
  assert.equal(value(pool.tryAcquire('c', { kind: 'api-key', where: { region: 'eu' } })), 'k1');
  assert.equal(pool.tryAcquire('c', { kind: 'proxy', where: { tier: 'paid' } }), null);
  assert.equal(pool.tryAcquire('c', { kind: 'account' }), null);
  const got = await pool.withLease('c', async (lease) => {
    assert.equal(pool.tryAcquire('c', { kind: 'proxy' }), null);
    return lease.value;
  }, { kind: 'proxy' });
  assert.equal(got, 'p1');
  pool.close();
});

test('exclude leaves values out, of any kind', () => {
  const pool = keys();
  assert.equal(value(pool.tryAcquire('c', { exclude: ['k1'] })), 'k2');
  assert.equal(value(pool.tryAcquire('c', { exclude: ['k1', 'k2', 'k3'] })), 'p1');
  assert.equal(pool.tryAcquire('c', { exclude: ['k1', 'k2', 'k3', 'p1'] }), null);
  assert.equal(value(pool.tryAcquire('c', { exclude: ['k2'], where: { tier: 'paid' } })), 'k3');
  pool.close();
});

test('prefer is tried first when it is selectable and admitted', async () => {
  const pool = keys();
  assert.equal(value(pool.tryAcquire('c', { prefer: 'k3' })), 'k3');
  assert.equal(value(pool.tryAcquire('c', { prefer: 'p1', kind: 'api-key' })), 'k1', 'a preferred value of another kind');
  assert.equal(value(pool.tryAcquire('c', { prefer: 'k3', where: { region: 'us' } })), 'k2', 'a preferred value not admitted');
  assert.equal(value(pool.tryAcquire('c', { prefer: 'nowhere' })), 'k1');
  const held = await pool.acquire('c', { prefer: 'k3' });
  assert.equal(held.value, 'k3');
  assert.equal(value(pool.tryAcquire('c', { prefer: 'k3' })), 'k1', 'a preferred value leased');
  await held.release();
  pool.block('api-key', 'k3', { context: 'c' });
  assert.equal(value(pool.tryAcquire('c', { prefer: 'k3' })), 'k1', 'a preferred value blocked');
  pool.close();
});

test('affinity gets the same resource again until it is blocked', async () => {
  const pool = keys();
  const got = async (options) => {
    const lease = await pool.acquire('c', options);
    await lease.release();
    return lease.value;
  };
  assert.equal(await got({ affinity: 'user-7', prefer: 'k3' }), 'k3');
  assert.equal(await got({ affinity: 'user-7' }), 'k3');
  assert.equal(await got({}), 'k1', 'without the key, selection as usual');
  assert.equal(await got({ affinity: 'user-8' }), 'k1', 'another key is bound by its own grants');
  pool.block('api-key', 'k3');
  assert.equal(await got({ affinity: 'user-7', exclude: ['k1'] }), 'k2', 'picked anew');
  pool.unblock('api-key', 'k3');
  assert.equal(await got({ affinity: 'user-7' }), 'k2', 'and bound to the new pick');
  assert.equal(await got({ affinity: 'user-7', kind: 'proxy' }), 'p1', 'a bound resource not admitted');
  assert.equal(await got({ affinity: 'user-7' }), 'p1');
  assert.equal(value(pool.tryAcquire('c', { affinity: 'user-7' })), 'p1');
  pool.close();
});

test('a waiting acquire keeps its selector', async () => {
  const pool = keys();
  const held = pool.tryAcquire('c', { kind: 'proxy' });
  let settled = false;
  const waiter = pool.acquire('c', { kind: 'proxy' }).then((lease) => {
    settled = true;
    return lease;
  });
  await new Promise((resolve) => setTimeout(resolve, 20));
  assert.equal(settled, false, 'the api keys are free, but not of the kind asked for');
  await held.release();
  const lease = await waiter;
  assert.equal(lease.value, 'p1');
  await lease.release();
  pool.close();
});

const BAD_CHOICES = [
  [{ where: { region: [] } }, 'where', 'each filter must list 1..=16 values'],
  [{ where: { 'bad name': 'eu' } }, 'where', "names may hold only ASCII letters, digits, '_', '-' and '.'"],
  [{ where: { region: 'x\n' } }, 'where', 'must not contain control characters'],
  [{ where: { region: 5 } }, 'where', 'must be an object of label name to a string or an array of strings'],
  [{ where: 'region' }, 'where', 'must be an object of label name to a string or an array of strings'],
  [{ where: ['region'] }, 'where', 'must be an object of label name to a string or an array of strings'],
  [{ where: Object.fromEntries([...Array(9).keys()].map((i) => [`l${i}`, 'v'])) }, 'where', 'must be at most 8 filters'],
  [{ exclude: 'k1' }, 'exclude', 'must be an array of strings'],
  [{ exclude: [1] }, 'exclude', 'must be an array of strings'],
  [{ exclude: [''] }, 'exclude', 'must not be empty'],
  [{ exclude: [...Array(65).keys()].map((i) => `v${i}`) }, 'exclude', 'must be at most 64 values'],
  [{ kind: '' }, 'kind', 'must not be empty'],
  [{ kind: 7 }, 'kind', 'must be a string'],
  [{ prefer: 'x'.repeat(257) }, 'prefer', 'must be at most 256 bytes'],
  [{ affinity: 'a\tb' }, 'affinity', 'must not contain control characters'],
];

test('bad choices name their field', async () => {
  const pool = keys();
  const named = (field, rule) => (e) => {
    assert.ok(e instanceof InvalidInputError, String(e));
    assert.deepEqual([e.code, e.field, e.rule, e.message], ['invalid_input', field, rule, `invalid ${field}: ${rule}`]);
    return true;
  };
  for (const [options, field, rule] of BAD_CHOICES) {
    assert.throws(() => pool.tryAcquire('c', options), named(field, rule), JSON.stringify(options));
    await assert.rejects(pool.acquire('c', { timeoutMs: 1_000, ...options }), named(field, rule));
    await assert.rejects(pool.withLease('c', async () => 1, options), named(field, rule));
  }
  assert.equal(pool.stats().liveLeases, 0);
  pool.close();
});

test('bad registrations name their field', () => {
  const pool = new Pool({ clock: new ManualClock() });
  const cases = [
    [{ labels: { 'bad name': 'x' } }, 'labels', "names may hold only ASCII letters, digits, '_', '-' and '.'"],
    [{ labels: { a: '' } }, 'labels', 'must not be empty'],
    [{ labels: { a: 1 } }, 'labels', 'must be an object of label name to string'],
    [{ labels: ['a'] }, 'labels', 'must be an object of label name to string'],
    [{ labels: Object.fromEntries([...Array(17).keys()].map((i) => [`l${i}`, 'v'])) }, 'labels', 'must be at most 16'],
    [{ secret: '' }, 'secret', 'must not be empty'],
    [{ secret: 'x'.repeat(4097) }, 'secret', 'must be at most 4096 bytes'],
    [{ secret: 42 }, 'secret', 'must be a string'],
  ];
  for (const [options, field, rule] of cases) {
    assert.throws(
      () => pool.register('api-key', 'k1', options),
      (e) => e instanceof InvalidInputError && e.field === field && e.rule === rule,
      JSON.stringify(options),
    );
  }
  assert.deepEqual(pool.resources(), [], 'nothing was registered');
  pool.close();
});
