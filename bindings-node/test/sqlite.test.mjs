// A SQLite store shared by two Node processes in turn: registrations (from a
// checkpoint), reports (from the durable log) and fencing tokens survive.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

import { Pool, NotOwnerError } from 'repute';

const child = fileURLToPath(new URL('fixtures/sqlite-child.mjs', import.meta.url));
const run = async (...args) => JSON.parse((await promisify(execFile)(process.execPath, [child, ...args])).stdout);

test('state and fencing tokens survive from one process to the next', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'repute-node-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const store = `sqlite:${join(dir, 'pool.db')}`;

  const first = await run(store, 'first');
  assert.deepEqual(first, { tokens: ['1', '2'], values: ['a', 'a'] });

  const second = await run(store, 'second');
  assert.deepEqual(
    second.resources.map((r) => [r.value, r.permits]),
    [
      ['a', 1],
      ['b', 2],
    ],
  );
  const shop = second.cells.find((c) => c.context === 'example.com');
  assert.equal(shop.observations, 2, 'the checkpointed report and the logged one');
  assert.equal(shop.score, 0, '+5 then -5');
  // The first process died holding a's only permit, in a lease no
  // checkpoint has: the permit table keeps a held until that lease's TTL
  // ends (I1), so the new owner grants b, whose fence starts at 1.
  assert.equal(second.value, 'b');
  assert.equal(second.token, '1');
});

test('a second process is refused the tenant while the first owns it', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'repute-node-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const store = `sqlite:${join(dir, 'pool.db')}`;

  const holder = spawn(process.execPath, [child, store, 'hold'], { stdio: ['pipe', 'pipe', 'inherit'] });
  const [line] = await once(holder.stdout, 'data');
  assert.equal(line.toString().trim(), 'ready');
  await assert.rejects(Pool.open({ store, tenant: 'shop' }), (e) => {
    assert.ok(e instanceof NotOwnerError);
    assert.equal(e.owner, `process ${holder.pid} (tenant "shop")`);
    return true;
  });
  holder.stdin.end();
  await once(holder, 'exit');
  (await Pool.open({ store, tenant: 'shop' })).close();
});
