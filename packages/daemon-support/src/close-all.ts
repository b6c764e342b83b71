/** One step of a shutdown sequence. */
export interface CloseStep {
  /** Named in the log line and the report when the step fails. */
  readonly name: string;
  readonly close: () => unknown;
  /** Longest the step may take before the sequence moves on, ms. @default 5000 */
  readonly timeoutMs?: number;
}

export interface CloseReport {
  /** Steps that threw or ran past their timeout, in order. */
  readonly failed: ReadonlyArray<{ readonly name: string; readonly err: unknown }>;
}

export interface CloseLog {
  error(obj: object, msg: string): void;
}

/** Thrown (as a report entry) for a step that ran past its timeout. */
export class CloseTimeoutError extends Error {
  override readonly name = 'CloseTimeoutError';
  constructor(
    readonly step: string,
    readonly timeoutMs: number,
  ) {
    super(`${step} did not close within ${timeoutMs} ms`);
  }
}

async function bounded(step: CloseStep): Promise<void> {
  const timeoutMs = step.timeoutMs ?? 5000;
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new CloseTimeoutError(step.name, timeoutMs)), timeoutMs);
    timer.unref();
  });
  try {
    await Promise.race([Promise.resolve().then(step.close), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Runs a shutdown sequence: every step, in order, each bounded by its timeout, whatever the
 * earlier ones did — one throwing step must not leave the later ones (an engine to stop, a runtime
 * dir to release) undone. Never rejects; failures are logged and returned.
 */
export async function closeAll(
  steps: ReadonlyArray<CloseStep | undefined>,
  options: { log?: CloseLog } = {},
): Promise<CloseReport> {
  const failed: Array<{ name: string; err: unknown }> = [];
  for (const step of steps) {
    if (step === undefined) continue;
    try {
      await bounded(step);
    } catch (err) {
      failed.push({ name: step.name, err });
      options.log?.error({ err, step: step.name }, 'shutdown step failed');
    }
  }
  return { failed };
}

/** Makes an async close idempotent: every call after the first returns the first call's promise. */
export function onceClose<T>(fn: () => Promise<T>): () => Promise<T> {
  let running: Promise<T> | undefined;
  return () => {
    running ??= fn();
    return running;
  };
}
