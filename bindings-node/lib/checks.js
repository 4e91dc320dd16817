'use strict';
// Argument checks. JavaScript types are checked here, where they are
// dynamic; value rules (lengths, ranges) are the core's, and come back as
// InvalidInputError too.

const { InvalidInputError } = require('./errors');

function invalidArg(field, rule) {
  return new InvalidInputError(`invalid ${field}: ${rule}`, { code: 'invalid_input', field, rule });
}

function str(field, v) {
  if (typeof v !== 'string') throw invalidArg(field, 'must be a string');
  return v;
}

function optStr(field, v) {
  return v === undefined || v === null ? undefined : str(field, v);
}

function num(field, v) {
  if (typeof v !== 'number') throw invalidArg(field, 'must be a number');
  return v;
}

function optNum(field, v) {
  return v === undefined || v === null ? undefined : num(field, v);
}

function uint(field, v) {
  if (!Number.isInteger(v) || v < 0 || v > 0xffffffff) throw invalidArg(field, 'must be an integer in 0..2^32');
  return v;
}

function optUint(field, v) {
  return v === undefined || v === null ? undefined : uint(field, v);
}

function bool(field, v) {
  if (typeof v !== 'boolean') throw invalidArg(field, 'must be a boolean');
  return v;
}

function obj(field, v) {
  if (v === undefined || v === null) return {};
  if (typeof v !== 'object') throw invalidArg(field, 'must be an object');
  return v;
}

/** An array of strings, or undefined. */
function optStrings(field, v) {
  if (v === undefined || v === null) return undefined;
  if (!Array.isArray(v) || !v.every((s) => typeof s === 'string')) throw invalidArg(field, 'must be an array of strings');
  return v;
}

function bigint(field, v) {
  if (typeof v === 'bigint') return v;
  if (Number.isSafeInteger(v) && v >= 0) return BigInt(v);
  throw invalidArg(field, 'must be a non-negative safe integer or a bigint');
}

function optBigint(field, v) {
  return v === undefined || v === null ? undefined : bigint(field, v);
}

module.exports = { invalidArg, str, optStr, num, optNum, uint, optUint, bool, obj, optStrings, bigint, optBigint };
