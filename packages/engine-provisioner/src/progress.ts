/** Phases of preparing an engine, in order. */
export type EnginePhase = 'source' | 'configure' | 'build' | 'verify' | 'done';

/** One progress report; `fraction` is the whole engine step, 0..1 (what pool-managerd reports). */
export interface EngineProgress {
  phase: EnginePhase;
  /** Overall engine progress 0..1; 1 once the binary is ready (cached or built). */
  fraction: number;
  /** CMake's own build percentage during `build` (snake_case: the object is logged as it is). */
  build_percent?: number;
  /** True when the binary came from the cache. */
  cached?: boolean;
}

/**
 * Build percentage from one line of `cmake --build` output: Makefiles print `[ 42%] Building …`,
 * Ninja prints `[17/345] Building …`. Returns undefined for any other line.
 */
export function parseCmakeProgress(line: string): number | undefined {
  const pct = /^\s*\[\s*(\d{1,3})%\]/.exec(line);
  if (pct?.[1]) {
    const n = Number(pct[1]);
    return n >= 0 && n <= 100 ? n : undefined;
  }
  const ninja = /^\s*\[(\d+)\/(\d+)\]/.exec(line);
  if (ninja?.[1] && ninja[2]) {
    const done = Number(ninja[1]);
    const total = Number(ninja[2]);
    return total > 0 && done <= total ? Math.floor((done / total) * 100) : undefined;
  }
  return undefined;
}

/** Share of the engine step each phase ends at (build dominates; configure is seconds). */
const PHASE_END: Readonly<Record<Exclude<EnginePhase, 'done'>, number>> = {
  source: 0.03,
  configure: 0.06,
  build: 0.98,
  verify: 1,
};

/** Overall fraction for a phase, given progress `within` it (0..1). */
export function overallFraction(phase: EnginePhase, within = 0): number {
  if (phase === 'done') return 1;
  const order: EnginePhase[] = ['source', 'configure', 'build', 'verify'];
  const i = order.indexOf(phase);
  const start = i === 0 ? 0 : PHASE_END[order[i - 1] as Exclude<EnginePhase, 'done'>];
  const end = PHASE_END[phase];
  const w = Math.min(1, Math.max(0, within));
  return Math.round((start + (end - start) * w) * 1000) / 1000;
}
