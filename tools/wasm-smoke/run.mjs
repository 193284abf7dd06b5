// Instantiates the smoke module (no imports: no glue, no wasm-bindgen) and plays the dots
// game on a virtual clock inside it; exits non-zero if it traps or a check fails.
// Usage: node run.mjs path/to/lagless_wasm_smoke.wasm [seconds]
import { readFile } from 'node:fs/promises';

const [path, seconds = '20'] = process.argv.slice(2);
const bytes = await readFile(path);
const { instance, module } = await WebAssembly.instantiate(bytes, {});
const imports = WebAssembly.Module.imports(module);
if (imports.length > 0) {
  console.error('wasm smoke: the module imports', imports, '(a sans-IO build should not)');
  process.exit(1);
}
const e = instance.exports;
const started = performance.now();
const failed = e.lagless_wasm_smoke_run(Number(seconds), 0);
const ms = performance.now() - started;
const names = ['rollbacks', 'other_error_p50_cm', 'other_error_p99_cm', 'own_error_cm', 'stale_views'];
for (let client = 0; client < 2; client++) {
  const figures = names.map((n, i) => `${n}=${e.lagless_wasm_smoke_figure(client * names.length + i).toFixed(2)}`);
  console.log(`wasm smoke: client ${client + 1}: ${figures.join(' ')}`);
}
console.log(`wasm smoke: ${seconds} s of dots over mobile in ${ms.toFixed(0)} ms, ${(bytes.length / 1024).toFixed(0)} KiB module`);
if (failed !== 0) {
  console.error(`wasm smoke: ${failed === 0xffffffff ? 'the run failed' : `${failed} check(s) failed`}`);
  process.exit(1);
}
