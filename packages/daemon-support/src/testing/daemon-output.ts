// Where a launched daemon's output goes and how it is read back: a file the kernel writes (the
// benchmarks: the runner spends no CPU on pipes), or lines captured as they arrive (the test suites).
import { readFileSync } from 'node:fs';
import type { Readable } from 'node:stream';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';

/** One JSON log line of a daemon (pino), as parsed; unchecked: read fields with `typeof`. */
export type JsonLine = Record<string, unknown>;

/** One line a daemon wrote, raw, with its JSON form when it was a JSON object. */
export interface CapturedLine {
  /** The daemon's name (the `name` it was launched with). */
  source: string;
  stream: 'stdout' | 'stderr';
  /** Wall clock (ms) when the launcher read it. */
  at: number;
  text: string;
  json: JsonLine | undefined;
}

/** What the daemon object needs of its output, whichever kind. */
export interface DaemonOutput {
  /** Every JSON line so far, in order. */
  jsonLines(): JsonLine[];
  /** The last `lines` raw lines, joined (for error messages). */
  tail(lines: number): string;
  /**
   * Resolves once everything the process wrote has been read, or after `boundMs` (a grandchild
   * that inherited the pipe could hold it open forever).
   */
  drained(boundMs: number): Promise<void>;
}

/** A JSON object line (pino writes one per line), else undefined. */
export function parseJsonLine(text: string): JsonLine | undefined {
  if (!text.trimStart().startsWith('{')) return undefined;
  try {
    const parsed: unknown = JSON.parse(text);
    return typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed) ? (parsed as JsonLine) : undefined;
  } catch {
    // not JSON, or a line still being written to a file
    return undefined;
  }
}

function readText(file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    // not created yet (or removed with its work dir): nothing written
    return '';
  }
}

/** The JSON lines of a log file, read now. */
export function readJsonLines(file: string): JsonLine[] {
  const out: JsonLine[] = [];
  for (const text of readText(file).split('\n')) {
    const json = parseJsonLine(text);
    if (json !== undefined) out.push(json);
  }
  return out;
}

/** stdout and stderr appended to one file by the kernel; read only when asked. */
export class FileOutput implements DaemonOutput {
  readonly path: string;

  constructor(path: string) {
    this.path = path;
  }

  jsonLines(): JsonLine[] {
    return readJsonLines(this.path);
  }

  tail(lines: number): string {
    return readText(this.path).split('\n').slice(-lines).join('\n');
  }

  /** The kernel wrote every byte before the process exited. */
  drained(): Promise<void> {
    return Promise.resolve();
  }
}

/** stdout and stderr read line by line into one array, in arrival order. */
export class CapturedOutput implements DaemonOutput {
  /** Every line so far; the same array grows as lines arrive. */
  readonly lines: CapturedLine[] = [];
  readonly #closed: Array<Promise<void>> = [];
  readonly #source: string;

  constructor(source: string) {
    this.#source = source;
  }

  /** Starts reading one of the child's pipes. */
  attach(stream: 'stdout' | 'stderr', input: Readable | null): void {
    if (input === null) return;
    const rl = createInterface({ input, crlfDelay: Number.POSITIVE_INFINITY });
    rl.on('line', (text) => {
      this.lines.push({ source: this.#source, stream, at: Date.now(), text, json: parseJsonLine(text) });
    });
    this.#closed.push(new Promise((resolve) => rl.once('close', () => resolve())));
  }

  jsonLines(): JsonLine[] {
    return this.lines.flatMap((l) => (l.json === undefined ? [] : [l.json]));
  }

  tail(lines: number): string {
    return this.lines
      .slice(-lines)
      .map((l) => l.text)
      .join('\n');
  }

  async drained(boundMs: number): Promise<void> {
    const bound = new AbortController();
    await Promise.race([
      Promise.all(this.#closed),
      sleep(boundMs, undefined, { signal: bound.signal, ref: false }).catch(() => undefined),
    ]);
    bound.abort();
  }
}
