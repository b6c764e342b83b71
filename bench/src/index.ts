// The bench package is a program (`pnpm bench`); these exports let other harnesses reuse its parts.
export { BENCHES, BENCH_ORDER } from './benches/index.js';
export type { Bench, BenchContext } from './lib/context.js';
export type { BenchOutcome, BenchResult, Figure, FigureRow, Target } from './lib/result.js';
export { buildResult, isMet, trimDetail, trimResult, writeResult } from './lib/result.js';
export {
  loadResults,
  renderPerformancePage,
  renderSection,
  updateReadme,
  writeAtomically,
  START_MARKER,
  END_MARKER,
} from './lib/readme.js';
export { summarize, percentile } from './lib/stats.js';
export type { Summary } from './lib/stats.js';
export { SseParser } from './lib/sse.js';
