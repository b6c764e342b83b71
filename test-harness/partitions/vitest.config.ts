import { defineProject } from 'vitest/config';

export default defineProject({
  test: { testTimeout: 180_000, hookTimeout: 31 * 60_000 },
});
