import { defineProject } from 'vitest/config';

// Unit tests of the harness only (statistics, SSE parsing, README writer, the FIXTURE node's wire
// contract). Benchmarks themselves never run under vitest: they are `pnpm bench`.
export default defineProject({
  test: { testTimeout: 30_000 },
});
