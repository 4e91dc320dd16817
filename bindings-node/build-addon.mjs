// Builds the addon (release) into repute.node and writes its declarations,
// as `napi build --release --dts` does, but for the host's own target: the
// napi CLI always passes cargo a `--target` triple, and cargo then compiles
// every dependency (wasmtime among them) a second time under
// target/<triple>/, apart from the builds cargo and maturin share. The
// declarations still come from napi-rs: napi-derive writes each item's type
// while it expands (into NAPI_TYPE_DEF_TMP_FOLDER), and the CLI's own
// `generateTypeDef` renders them.
//
//   node build-addon.mjs [--features a,b] [--dts repute.d.node.ts]
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { generateTypeDef } from '@napi-rs/cli';

const here = dirname(fileURLToPath(import.meta.url));
const crate = 'repute-node';
const { values } = parseArgs({
  options: { features: { type: 'string' }, dts: { type: 'string', default: 'repute.d.node.ts' } },
});

function cargo(args, env = process.env) {
  const run = spawnSync('cargo', args, { cwd: here, env, stdio: ['ignore', 'pipe', 'inherit'], encoding: 'utf8', maxBuffer: 1 << 28 });
  if (run.status !== 0) process.exit(run.status ?? 1);
  return run.stdout;
}

const metadata = JSON.parse(cargo(['metadata', '--format-version', '1', '--no-deps']));
const typeDefDir = join(metadata.target_directory, 'napi-type-def');
mkdirSync(typeDefDir, { recursive: true });
const env = { ...process.env, NAPI_TYPE_DEF_TMP_FOLDER: typeDefDir };
// As the CLI does: without this crate's types in the folder, rebuild it so
// napi-derive writes them (its build script reruns when this changes).
if (!existsSync(join(typeDefDir, crate))) {
  env[`NAPI_FORCE_BUILD_${crate.toUpperCase().replace(/-/g, '_')}`] = String(Date.now());
}

const args = ['build', '--release', '-p', crate, '--message-format=json-render-diagnostics'];
if (values.features) args.push('--features', values.features);
const artifact = cargo(args, env)
  .split('\n')
  .filter((line) => line.startsWith('{'))
  .map((line) => JSON.parse(line))
  .find((m) => m.reason === 'compiler-artifact' && m.target.name === crate.replace(/-/g, '_') && m.target.kind.includes('cdylib'));
if (!artifact) {
  console.error(`build-addon: cargo built no cdylib of ${crate}`);
  process.exit(1);
}
copyFileSync(artifact.filenames.find((f) => /\.(so|dylib|dll)$/.test(f)), join(here, 'repute.node'));

const { dts } = await generateTypeDef({ typeDefDir, cwd: here });
writeFileSync(join(here, values.dts), dts);
