import { closeSync, existsSync, fstatSync, mkdirSync, openSync, renameSync, rmSync, writeSync } from 'node:fs';
import { dirname } from 'node:path';

export interface RotatingLogOptions {
  /** Rotate when the file would exceed this size, bytes. @default 10485760 (10 MiB) */
  maxBytes?: number;
  /** Rotated files kept (`.1` newest … `.N` oldest). @default 3 */
  keep?: number;
}

/**
 * Append-only log file rotated by size (`x.log` → `x.log.1` → … → `x.log.N`, oldest dropped).
 * Writes are synchronous: engine output is a few lines per request, and ordering with rotation
 * must be exact. `close()` is idempotent.
 */
export class RotatingLogFile {
  readonly path: string;
  readonly maxBytes: number;
  readonly keep: number;
  #fd: number | undefined;
  #size = 0;

  constructor(path: string, options: RotatingLogOptions = {}) {
    this.path = path;
    this.maxBytes = options.maxBytes ?? 10 * 1024 * 1024;
    this.keep = Math.max(0, options.keep ?? 3);
    mkdirSync(dirname(path), { recursive: true });
    this.#open();
  }

  write(chunk: Buffer | string): void {
    if (this.#fd === undefined) return;
    const buf = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
    if (this.#size > 0 && this.#size + buf.length > this.maxBytes) this.#rotate();
    if (this.#fd === undefined) return;
    writeSync(this.#fd, buf);
    this.#size += buf.length;
  }

  close(): void {
    if (this.#fd === undefined) return;
    closeSync(this.#fd);
    this.#fd = undefined;
  }

  #open(): void {
    this.#fd = openSync(this.path, 'a');
    this.#size = fstatSync(this.#fd).size;
  }

  #rotate(): void {
    this.close();
    if (this.keep === 0) {
      rmSync(this.path, { force: true });
    } else {
      rmSync(`${this.path}.${this.keep}`, { force: true });
      for (let i = this.keep - 1; i >= 1; i--) {
        if (existsSync(`${this.path}.${i}`)) renameSync(`${this.path}.${i}`, `${this.path}.${i + 1}`);
      }
      renameSync(this.path, `${this.path}.1`);
    }
    this.#open();
  }
}
