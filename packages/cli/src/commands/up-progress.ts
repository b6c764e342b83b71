import cliProgress from 'cli-progress';

/** A daemon's JSON log record, as `llorch up` reads it. */
export type LogRecord = Record<string, unknown>;

/**
 * `llorch up` on a terminal: one live line per long step of each pool (engine configure/build,
 * model download/generate, engine start), redrawn in place from pool-managerd's progress records
 * instead of printed as lines. Other lines are printed above the bars.
 */
export class UpProgress {
  readonly #stream: NodeJS.WritableStream;
  readonly #bars: cliProgress.MultiBar;
  /** Each pool's live bars, by `<pool>\0<step kind>`. */
  readonly #steps = new Map<string, cliProgress.SingleBar>();
  #stopped = false;

  constructor(stream: NodeJS.WritableStream) {
    this.#stream = stream;
    this.#bars = new cliProgress.MultiBar(
      {
        stream: stream as NodeJS.WriteStream,
        format: '  {label} [{bar}] {percentage}%',
        hideCursor: true,
        clearOnComplete: false,
        stopOnComplete: false,
        autopadding: true,
        // logged lines are written over the bars' lines; unchanged bars must be drawn again too
        forceRedraw: true,
      },
      cliProgress.Presets.shades_classic,
    );
  }

  /** Shows `rec` as progress; false when it is not a progress record (print it as a line). */
  take(rec: LogRecord): boolean {
    if (this.#stopped) return false;
    const pool = typeof rec.pool_id === 'string' ? rec.pool_id : 'pool';
    if (rec.msg === 'provisioning progress') {
      if (typeof rec.engine_step === 'string' && typeof rec.engine_percent === 'number')
        this.#set(pool, 'engine', `${pool} ${rec.engine_step}`, rec.engine_percent);
      if (typeof rec.model_step === 'string' && typeof rec.model_percent === 'number')
        this.#set(pool, 'model', `${pool} ${rec.model_step}`, rec.model_percent);
      return true;
    }
    if (rec.msg === 'engine spawned') {
      this.#set(pool, 'start', `${pool} engine start`, 0);
      return true;
    }
    if (rec.msg === 'engine healthy') {
      this.#set(pool, 'start', `${pool} engine start`, 100);
      return true;
    }
    return false;
  }

  /** Prints a line above the live bars. */
  log(text: string): void {
    if (this.#stopped || this.#steps.size === 0) return void this.#stream.write(`${text}\n`);
    // the bars' redraw writes logged lines over the bar lines and clears only the first: each
    // line clears its own (ESC [2K)
    this.#bars.log(`\x1b[2K${text}\n`);
  }

  /** Leaves the bars as they are drawn; later output goes below them. Idempotent. */
  stop(): void {
    if (this.#stopped) return;
    this.#stopped = true;
    if (this.#steps.size > 0) this.#bars.stop();
  }

  #set(pool: string, kind: string, label: string, percent: number): void {
    const key = `${pool}\0${kind}`;
    const bar = this.#steps.get(key);
    if (bar === undefined) this.#steps.set(key, this.#bars.create(100, percent, { label }));
    else bar.update(percent, { label });
  }
}
