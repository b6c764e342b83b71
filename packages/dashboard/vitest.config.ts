import { defineProject } from 'vitest/config';

// The page's pure parts and its data layer run in Node (fetch, streams and TextDecoderStream are
// the same web APIs there); the page itself is tested in a real browser by test-harness/e2e-haiku.
export default defineProject({
  resolve: { conditions: ['source'] },
  test: { include: ['src/**/*.test.ts', 'web/src/**/*.test.ts'], environment: 'node', testTimeout: 30_000 },
});
