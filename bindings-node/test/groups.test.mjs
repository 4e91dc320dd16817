// Quota groups and day windows: the `groups` option of register, `rpd` and
// `tpd` beside the per-minute limits, setGroup and the groups() views. The
// pools are on a manual clock and select with the `first` strategy, so
// every grant and refusal is exact.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { Pool, ManualClock, InvalidInputError, NoResourceAvailableError } from 'repute';

function keys() {
  const clock = new ManualClock();
  return { clock, pool: new Pool({ clock, strategy: 'first' }) };
}

async function refusal(pool) {
  try {
    await pool.acquire('gpt-4o', { timeoutMs: 0 });
  } catch (e) {
    assert.ok(e instanceof NoResourceAvailableError, String(e));
    return e;
  }
  assert.fail('granted');
}

test("members share their group's limits and the views show both windows", async () => {
  const { clock, pool } = keys();
  for (const key of ['k1', 'k2']) assert.equal(pool.register('api-key', key, { groups: ['project:acme'] }), true);
  assert.deepEqual(pool.resources().map((r) => r.groups), [['project:acme'], ['project:acme']]);
  assert.deepEqual(pool.groups(), [
    {
      name: 'project:acme',
      limits: { sharedQuota: false },
      members: 2,
      leased: 0,
      usage: { grants: 0, tokens: 0 },
      dayUsage: { grants: 0, tokens: 0 },
    },
  ]);
  assert.equal(pool.setGroup('project:acme', { rpd: 2, concurrency: 1 }), true);
  assert.equal(pool.setGroup('project:acme', { rpd: 2, concurrency: 1 }), false, 'the same limits: nothing changed');
  const lease = await pool.acquire('gpt-4o', { timeoutMs: 0 });
  assert.equal((await refusal(pool)).limited, 2, "the group's one lease is out: both members wait");
  const [group] = pool.groups();
  assert.deepEqual([group.leased, group.dayUsage.grants], [1, 1]);
  assert.ok(group.limitedUntilMs > pool.now() && typeof group.limitedUntilUnixMs === 'number');
  await lease.release();
  clock.advance(1_000);
  await (await pool.acquire('gpt-4o', { timeoutMs: 0 })).release();
  clock.advance(1_000);
  await refusal(pool);
  clock.advance(86_400_000);
  await (await pool.acquire('gpt-4o', { timeoutMs: 0 })).release();
  assert.equal(pool.setGroup('project:acme'), true, 'no limits: removed');
  assert.deepEqual(pool.groups()[0].limits, { sharedQuota: false });
});

test("a resource's day limits show in its view and register again", () => {
  const { pool } = keys();
  pool.register('api-key', 'k1', { limits: { rpm: 60, rpd: 2, tpd: 1_000n } });
  const [view] = pool.resources();
  assert.deepEqual(view.limits, { rpm: 60, rpd: 2, tpd: 1_000 });
  assert.equal(pool.register('api-key', 'k1', { limits: view.limits }), false);
});

test("a group's view sets its limits again", () => {
  const { pool } = keys();
  const given = { rpm: 600, tpm: 90_000, rpd: 10_000, tpd: 5_000_000, concurrency: 8, sharedQuota: true };
  assert.equal(pool.setGroup('account:x', given), true);
  const [group] = pool.groups();
  assert.deepEqual([group.members, group.limits], [0, given]);
  assert.equal(pool.setGroup(group.name, group.limits), false);
});

test('bad groups and group limits throw naming their field, and nothing is applied', () => {
  const { pool } = keys();
  const cases = [
    [{ rpm: 0 }, 'group.rpm', 'must be in 1..=100000'],
    [{ tpm: 0 }, 'group.tpm', 'must be > 0'],
    [{ rpd: 100_000_001 }, 'group.rpd', 'must be in 1..=100000000'],
    [{ tpd: 0 }, 'group.tpd', 'must be > 0'],
    [{ concurrency: 0 }, 'group.concurrency', 'must be in 1..=1000000'],
    [{ concurrency: -1 }, 'group.concurrency', undefined],
    [{ sharedQuota: 'yes' }, 'group.sharedQuota', 'must be a boolean'],
  ];
  for (const [limits, field, rule] of cases) {
    assert.throws(
      () => pool.setGroup('g', limits),
      (e) => e instanceof InvalidInputError && e.field === field && (rule === undefined || e.rule === rule),
      JSON.stringify(limits),
    );
  }
  assert.throws(() => pool.setGroup('', { rpm: 1 }), (e) => e instanceof InvalidInputError && e.field === 'group');
  assert.deepEqual(pool.groups(), [], 'nothing was set');
  const bad = [
    [{ groups: [''] }, 'groups'],
    [{ groups: 'g' }, 'groups'],
    [{ groups: ['a', 'a'] }, 'groups'],
    [{ groups: Array.from({ length: 9 }, (_, i) => `g${i}`) }, 'groups'],
    [{ limits: { rpd: 0 } }, 'limits.rpd'],
    [{ limits: { tpd: 0 } }, 'limits.tpd'],
  ];
  for (const [options, field] of bad) {
    assert.throws(
      () => pool.register('api-key', 'k1', options),
      (e) => e instanceof InvalidInputError && e.field === field,
      JSON.stringify(options),
    );
  }
  assert.deepEqual(pool.resources(), [], 'nothing was registered');
});
