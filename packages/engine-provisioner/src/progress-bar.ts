import cliProgress from 'cli-progress';
import type { EngineProgress } from './progress.js';

/** A terminal progress bar fed by `onProgress`; only for interactive use (the CLI on a TTY). */
export interface ProgressBar {
  update: (p: EngineProgress) => void;
  /** Idempotent. */
  stop: () => void;
}

export function createProgressBar(stream: NodeJS.WriteStream): ProgressBar {
  const bar = new cliProgress.SingleBar(
    { stream, format: 'llama-server {phase} [{bar}] {percentage}%', hideCursor: true, clearOnComplete: false },
    cliProgress.Presets.shades_classic,
  );
  let started = false;
  let stopped = false;
  return {
    update: (p) => {
      if (stopped) return;
      const value = Math.round(p.fraction * 100);
      if (!started) {
        bar.start(100, value, { phase: p.phase });
        started = true;
      } else {
        bar.update(value, { phase: p.cached ? 'cached' : p.phase });
      }
    },
    stop: () => {
      if (started && !stopped) bar.stop();
      stopped = true;
    },
  };
}
