import { fileURLToPath } from 'node:url';
import preact from '@preact/preset-vite';
import { defineConfig } from 'vite';

const here = (p: string): string => fileURLToPath(new URL(p, import.meta.url));

// The page is served by orchestratord under /dashboard/ (and its index also at /), so asset URLs
// carry that base. `vite` (dev server) proxies the API to a running orchestratord.
export default defineConfig({
  root: here('./web'),
  base: '/dashboard/',
  plugins: [preact()],
  build: {
    outDir: here('./dist/web'),
    emptyOutDir: true,
    // one small bundle; no source maps shipped to operators' browsers
    sourcemap: false,
    target: 'es2022',
  },
  server: {
    proxy: Object.fromEntries(
      ['/v1', '/v2'].map((p) => [
        p,
        { target: process.env.LLORCH_DASHBOARD_API ?? 'http://127.0.0.1:8080', changeOrigin: true },
      ]),
    ),
  },
});
