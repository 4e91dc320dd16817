// The error classes errors.d.ts declares (index.d.ts exports them), checked against the host's code
// table (`repute_host::codes`), which the JavaScript layer makes its classes
// from: the declarations are read with the TypeScript compiler, not trusted.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import ts from 'typescript';

const native = createRequire(import.meta.url)('../repute.node');
const path = new URL('../errors.d.ts', import.meta.url);
const source = ts.createSourceFile('errors.d.ts', readFileSync(path, 'utf8'), ts.ScriptTarget.Latest, true);

/** The string literals of a type: `'a' | 'b'` gives ['a', 'b']. */
function literals(type) {
  const parts = ts.isUnionTypeNode(type) ? type.types : [type];
  return parts.map((t) => {
    assert.ok(ts.isLiteralTypeNode(t) && ts.isStringLiteral(t.literal), `${t.getText()} is a string literal`);
    return t.literal.text;
  });
}

/** Each declared class that extends ReputeError: its codes and its fields (name to optional). */
function declaredErrors() {
  const classes = new Map();
  for (const node of source.statements) {
    if (!ts.isClassDeclaration(node)) continue;
    const base = node.heritageClauses?.[0]?.types[0]?.expression.getText();
    if (base !== 'ReputeError') continue;
    let codes;
    const fields = new Map();
    for (const member of node.members) {
      if (!ts.isPropertyDeclaration(member)) continue;
      const name = member.name.getText();
      if (name === 'code') codes = literals(member.type);
      else fields.set(name, member.questionToken !== undefined);
    }
    classes.set(node.name.text, { codes, fields });
  }
  return classes;
}

test("errors.d.ts declares the code table's error classes, codes and fields", () => {
  const rows = native._errorCodes();
  const declared = declaredErrors();
  const tableClasses = [...new Set(rows.map((r) => r.class))];
  assert.deepEqual([...declared.keys()].sort(), [...tableClasses].sort(), 'one declared subclass of ReputeError per class');
  for (const name of tableClasses) {
    const ofClass = rows.filter((r) => r.class === name);
    const { codes, fields } = declared.get(name);
    assert.deepEqual(codes?.sort(), ofClass.map((r) => r.code).sort(), `${name}.code`);
    const jsFields = ofClass[0].jsFields;
    for (const field of jsFields) assert.equal(fields.get(field), false, `${name}.${field} is declared, not optional`);
    for (const [field, optional] of fields) {
      assert.ok(jsFields.includes(field) || optional, `${name}.${field}: not in the table, so optional (set by the JavaScript layer only)`);
    }
  }
  const alias = source.statements.find((s) => ts.isTypeAliasDeclaration(s) && s.name.text === 'ErrorCode');
  assert.deepEqual(literals(alias.type).sort(), rows.map((r) => r.code).sort(), 'ErrorCode');
});
