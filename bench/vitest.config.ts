import { defineProject } from 'vitest/config';

// Unit tests of the harness only (statistics, SSE parsing, README writer; the FIXTURE nodes' wire
// contract is tested in packages/fixture-pool-manager). Benchmarks never run under vitest: they are `pnpm bench`.
export default defineProject({
  test: { testTimeout: 30_000 },
});
