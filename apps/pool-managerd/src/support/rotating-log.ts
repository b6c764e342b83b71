import {
  closeSync,
  copyFileSync,
  existsSync,
  fstatSync,
  ftruncateSync,
  mkdirSync,
  openSync,
  readSync,
  renameSync,
  rmSync,
  writeSync,
} from 'node:fs';
import { dirname } from 'node:path';

export interface RotatingLogOptions {
  /** Rotate when the file exceeds this size, bytes. @default 10485760 (10 MiB) */
  maxBytes?: number;
  /** Rotated files kept (`.1` newest … `.N` oldest). @default 3 */
  keep?: number;
}

/**
 * Append-only log file rotated by size (`x.log` → `x.log.1` → … → `x.log.N`, oldest dropped), whose
 * descriptor can be handed to a child process as its stdout/stderr: the engine writes its own output
 * (pool-managerd never wakes per engine line). Since that writer cannot reopen the file, rotation is
 * copy-then-truncate (logrotate's `copytruncate`): the file is opened `O_APPEND`, so after the
 * truncation every writer continues at the new end. A line written between the copy and the
 * truncation is lost — the price of a writer that cannot reopen. Rotation happens when
 * {@link rotateIfOver} finds the file over `maxBytes` (called after our own writes and on a timer
 * by whoever hands the descriptor out), so a fast writer can overshoot by what it writes in between.
 * `close()` is idempotent.
 */
export class RotatingLogFile {
  readonly path: string;
  readonly maxBytes: number;
  readonly keep: number;
  #fd: number | undefined;

  constructor(path: string, options: RotatingLogOptions = {}) {
    this.path = path;
    this.maxBytes = options.maxBytes ?? 10 * 1024 * 1024;
    this.keep = Math.max(0, options.keep ?? 3);
    mkdirSync(dirname(path), { recursive: true });
    this.#fd = openSync(this.path, 'a');
  }

  /** The open descriptor (`O_APPEND`), for a child's stdio; undefined once closed. */
  get fd(): number | undefined {
    return this.#fd;
  }

  /** The file's size now (every writer's lines counted); 0 once closed. */
  get size(): number {
    return this.#fd === undefined ? 0 : fstatSync(this.#fd).size;
  }

  write(chunk: Buffer | string): void {
    if (this.#fd === undefined) return;
    this.rotateIfOver();
    writeSync(this.#fd, typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
  }

  /** Rotates when the file (written by anyone holding the descriptor) is over `maxBytes`. */
  rotateIfOver(): void {
    if (this.#fd === undefined || this.size <= this.maxBytes) return;
    if (this.keep > 0) {
      rmSync(`${this.path}.${this.keep}`, { force: true });
      for (let i = this.keep - 1; i >= 1; i--) {
        if (existsSync(`${this.path}.${i}`)) renameSync(`${this.path}.${i}`, `${this.path}.${i + 1}`);
      }
      copyFileSync(this.path, `${this.path}.1`);
    }
    ftruncateSync(this.#fd, 0);
  }

  close(): void {
    if (this.#fd === undefined) return;
    closeSync(this.#fd);
    this.#fd = undefined;
  }
}

/**
 * What a file holds from byte `offset` on, at most its last `maxBytes` (from 0 when the file is now
 * shorter than `offset`: it was truncated by a rotation), and where it ended.
 */
export function readFileSince(path: string, offset: number, maxBytes: number): { text: string; end: number } {
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch {
    return { text: '', end: 0 };
  }
  try {
    const size = fstatSync(fd).size;
    const start = Math.max(offset > size ? 0 : offset, size - maxBytes);
    const buf = Buffer.alloc(size - start);
    const n = buf.length > 0 ? readSync(fd, buf, 0, buf.length, start) : 0;
    return { text: buf.subarray(0, n).toString('utf8'), end: start + n };
  } finally {
    closeSync(fd);
  }
}
