// The partition map of partitioned servers: the same partition for a context
// and a lease id as the server computes (the host's pinned values), and
// typed refusals naming the argument.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { partitionOf, leasePartition, InvalidInputError } from 'repute';

test('a context and a lease id name the partition a server sends them to', () => {
  const sites = ['shop.example', 'news.example', 'api.example', 'search.example'];
  assert.deepEqual(sites.map((s) => partitionOf(s, 3)), [1, 2, 2, 1]);
  assert.deepEqual(sites.map((s) => partitionOf(s, 4)), [1, 2, 3, 1]);
  assert.equal(partitionOf('anything', 1), 0);
  // Owner epoch 2 of partition 1 of 3 hands out ids from (2 * 3 + 1) << 32.
  const floor = 7n << 32n;
  assert.equal(leasePartition(floor, 3), 1);
  assert.equal(leasePartition(floor + 5n, 3), 1);
  assert.equal(leasePartition(Number(floor + 5n), 3), 1);
});

test('a bad count or lease id is refused naming it', () => {
  for (const [call, field] of [
    [() => partitionOf('shop.example', 0), 'partitions'],
    [() => partitionOf('shop.example', 65), 'partitions'],
    [() => partitionOf('shop.example', 1.5), 'partitions'],
    [() => partitionOf(3, 3), 'context'],
    [() => leasePartition(-1, 3), 'leaseId'],
    [() => leasePartition(1n << 64n, 3), 'leaseId'],
  ]) {
    assert.throws(call, (e) => e instanceof InvalidInputError && e.field === field, field);
  }
});
