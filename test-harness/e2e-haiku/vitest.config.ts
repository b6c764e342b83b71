import { defineProject } from 'vitest/config';

export default defineProject({
  test: {
    testTimeout: 120_000,
    // the e2e suite spawns real daemons and may build llama-server on a cold cache
    hookTimeout: 31 * 60_000,
  },
});
