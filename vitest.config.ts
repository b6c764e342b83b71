import { defineConfig } from 'vitest/config';

// One vitest run across the workspace; each package is its own project so its tests run with its
// own root. `source` makes workspace imports resolve to TypeScript sources, so unit tests do not
// depend on a prior build (process-level tests that spawn apps use the built dist/).
export default defineConfig({
  resolve: { conditions: ['source'] },
  test: {
    projects: ['packages/*', 'apps/*', 'test-harness/*', 'bench'],
    globalSetup: ['./vitest.global-setup.ts'],
    // the engine build above may take a while on a cold cache
    hookTimeout: 60 * 60_000,
  },
});
