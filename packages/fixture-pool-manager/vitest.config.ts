import { defineProject } from 'vitest/config';

export default defineProject({
  resolve: { conditions: ['source'] },
  test: { testTimeout: 30_000, hookTimeout: 60_000 },
});
