// require() and import() load one package instance.
const { test } = require('node:test');
const assert = require('node:assert/strict');

const repute = require('repute');

test('require() and import() give the same classes', async () => {
  const esm = await import('repute');
  assert.equal(esm.Pool, repute.Pool);
  assert.equal(esm.default, repute);
  // Every export is an ES named export too (Node reads them off index.js).
  assert.deepEqual(Object.keys(esm).filter((k) => k !== 'default').sort(), Object.keys(repute).sort());
  for (const name of Object.keys(repute)) {
    assert.equal(typeof repute[name], 'function', name);
    assert.equal(esm[name], repute[name], name);
  }
  const pool = new repute.Pool();
  pool.register('proxy', 'a');
  assert.equal(pool.tryAcquire('c').value, 'a');
  pool.close();
});
