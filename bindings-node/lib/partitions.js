'use strict';
// The partition map of partitioned mode (`repute serve --mode partitioned`):
// which partition holds a context, and which granted a lease, as every
// server computes them, so a client can send a request straight to the
// owner `GET /v1/partitions` names.

const native = require('../repute.node');
const { str, uint, bigint } = require('./checks');

/** @param {string} context @param {number} partitions */
function partitionOf(context, partitions) {
  return native.partitionOf(str('context', context), uint('partitions', partitions));
}

/** @param {bigint | number} leaseId @param {number} partitions */
function leasePartition(leaseId, partitions) {
  return native.leasePartition(bigint('leaseId', leaseId), uint('partitions', partitions));
}

module.exports = { partitionOf, leasePartition };
