// The CommonJS entry and the ES module entry are one package instance.
const { test } = require('node:test');
const assert = require('node:assert/strict');

const repute = require('repute');

test('require() and import() give the same classes', async () => {
  const esm = await import('repute');
  assert.equal(esm.Pool, repute.Pool);
  assert.equal(esm.default, repute);
  for (const name of ['Lease', 'ManualClock', 'ReputeError', 'NotOwnerError', 'StoreError']) {
    assert.equal(typeof repute[name], 'function', name);
    assert.equal(esm[name], repute[name], name);
  }
  const pool = new repute.Pool();
  pool.register('proxy', 'a');
  assert.equal(pool.tryAcquire('c').value, 'a');
  pool.close();
});
