// Builds dist/: the ESM bundle (esbuild) and the type declarations (tsc).
// Deterministic: fixed options, no banner with a date, no source map with
// absolute paths, so the committed dist is what `npm run build` makes.
import { build } from 'esbuild';
import { execFileSync } from 'node:child_process';
import { rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
rmSync('dist', { recursive: true, force: true });

await build({
  entryPoints: ['src/index.ts'],
  outfile: 'dist/lobbyhost-client.js',
  bundle: true,
  format: 'esm',
  platform: 'neutral',
  target: 'es2020',
  minify: true,
  legalComments: 'none',
  sourcemap: false,
  charset: 'utf8',
  logLevel: 'warning',
});

execFileSync(process.execPath, [require.resolve('typescript/bin/tsc'), '-p', 'tsconfig.json'], { stdio: 'inherit' });
writeFileSync('dist/lobbyhost-client.d.ts', "export * from './types/index.js';\n");
