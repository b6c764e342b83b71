import { defineProject } from 'vitest/config';

export default defineProject({
  // one file at a time: each runs a cluster and asserts timings (a 2-core machine shared with 4 clusters missed them)
  test: {
    setupFiles: ['./src/lab-tools.setup.ts'],
    testTimeout: 180_000,
    hookTimeout: 31 * 60_000,
    fileParallelism: false,
  },
});
