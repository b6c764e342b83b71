import cliProgress from 'cli-progress';
import type { Logger } from 'pino';

/** Download progress of one model. `bytes_total` is absent when the server sends no length. */
export interface ModelProgress {
  bytes_done: number;
  bytes_total?: number;
}

export interface ProgressReporterOptions {
  logger: Logger;
  /** Terminal for a progress bar; a bar is drawn only when it is a TTY. */
  tty?: NodeJS.WriteStream | undefined;
  /** Receivers of structured events (at most every `intervalMs`, plus the final one). */
  listeners: Iterable<(p: ModelProgress) => void>;
  /** @default 250 */
  intervalMs?: number;
  /** Interval of `download progress` log lines when no bar is drawn. @default 5000 */
  logIntervalMs?: number;
}

/**
 * Fans download progress out to a cli-progress bar (on a TTY), to `onProgress` listeners and,
 * without a TTY, to periodic structured log lines.
 */
export class ProgressReporter {
  private bar: cliProgress.SingleBar | undefined;
  private lastEmit = 0;
  private lastLog = 0;
  private last: ModelProgress = { bytes_done: 0 };
  private readonly intervalMs: number;
  private readonly logIntervalMs: number;

  constructor(
    private readonly opts: ProgressReporterOptions,
    private readonly label: string,
  ) {
    this.intervalMs = opts.intervalMs ?? 250;
    this.logIntervalMs = opts.logIntervalMs ?? 5000;
  }

  update(p: ModelProgress): void {
    this.last = p;
    const now = performance.now();
    if (this.opts.tty?.isTTY) {
      if (!this.bar) {
        this.bar = new cliProgress.SingleBar(
          {
            stream: this.opts.tty,
            format: `${this.label} [{bar}] {percentage}% {value_mb}/{total_mb} MiB`,
            hideCursor: false,
          },
          cliProgress.Presets.shades_classic,
        );
        this.bar.start(p.bytes_total ?? 0, p.bytes_done, { value_mb: '0', total_mb: '?' });
      }
      if (p.bytes_total !== undefined) this.bar.setTotal(p.bytes_total);
      this.bar.update(p.bytes_done, {
        value_mb: (p.bytes_done / 2 ** 20).toFixed(1),
        total_mb: p.bytes_total === undefined ? '?' : (p.bytes_total / 2 ** 20).toFixed(1),
      });
    } else if (now - this.lastLog >= this.logIntervalMs) {
      this.lastLog = now;
      this.opts.logger.info({ model: this.label, ...p }, 'download progress');
    }
    if (now - this.lastEmit >= this.intervalMs) {
      this.lastEmit = now;
      this.emit(p);
    }
  }

  /** Final event (always delivered) and bar teardown. */
  finish(): void {
    this.emit(this.last);
    this.bar?.stop();
    this.bar = undefined;
  }

  private emit(p: ModelProgress): void {
    for (const l of this.opts.listeners) {
      try {
        l({ ...p });
      } catch (err) {
        this.opts.logger.warn({ err }, 'onProgress listener threw');
      }
    }
  }
}
