import { spawn, type ChildProcessByStdio } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import type { Readable } from 'node:stream';
import { describe, expect, it, onTestFinished, vi } from 'vitest';
import { logDestination } from './log-destination.js';

// Process-level: a sink's failure modes only show on a real pipe between two processes.
const WRITER = fileURLToPath(new URL('./fixtures/log-writer.mjs', import.meta.url));

interface Writer {
  child: ChildProcessByStdio<null, Readable, Readable>;
  /** Resolves once stderr has shown `text`. */
  stderr(text: string): Promise<void>;
  /** Resolves with the exit code; SIGKILLs the writer (and fails) past `ms`. */
  exitWithin(ms: number): Promise<number | null>;
}

function start(lines: number): Writer {
  const child = spawn(process.execPath, [WRITER, String(lines)], { stdio: ['ignore', 'pipe', 'pipe'] });
  onTestFinished(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  let seen = '';
  const waiters: Array<() => void> = [];
  child.stderr.on('data', (c: Buffer) => {
    seen += c.toString('utf8');
    for (const w of waiters.splice(0)) w();
  });
  const exited = once(child, 'exit') as Promise<[number | null, string | null]>;
  return {
    child,
    async stderr(text) {
      while (!seen.includes(text)) {
        if (child.exitCode !== null) throw new Error(`exited without '${text}' on stderr: ${seen}`);
        await new Promise<void>((resolve) => waiters.push(resolve));
      }
    },
    async exitWithin(ms) {
      const timer = setTimeout(() => child.kill('SIGKILL'), ms);
      const [code, signal] = await exited;
      clearTimeout(timer);
      expect(signal, `killed after ${ms} ms: the sink blocked the process`).toBeNull();
      return code;
    },
  };
}

describe('logDestination', () => {
  it('loses no line to a slow reader', async () => {
    const w = start(5000);
    w.child.stdout.pause();
    await w.stderr('ready');
    let out = '';
    w.child.stdout.on('data', (c: Buffer) => {
      out += c.toString('utf8');
    });
    const ended = once(w.child.stdout, 'end');
    w.child.stdout.resume();
    w.child.kill('SIGTERM');
    expect(await w.exitWithin(10_000)).toBe(0);
    await ended;
    const numbers = out
      .split('\n')
      .filter((l) => l.startsWith('{"n"'))
      .map((l) => (JSON.parse(l) as { n: number }).n);
    expect(numbers).toEqual(Array.from({ length: 5000 }, (_, i) => i));
    expect(out.trimEnd().endsWith('{"msg":"stopped"}')).toBe(true);
  });

  it('writes a lone buffered line within its flush period, without more lines or a flush', async () => {
    const w = start(1);
    const [chunk] = (await once(w.child.stdout, 'data')) as [Buffer];
    expect(chunk.toString('utf8')).toMatch(/^\{"n":0,/);
  });

  it('makes no write while idle: the flush is armed by a line, not by the clock', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'log-destination-'));
    const fd = fs.openSync(join(dir, 'log'), 'w');
    onTestFinished(async () => {
      fs.closeSync(fd);
      await rm(dir, { recursive: true, force: true });
    });
    // sonic-boom writes through the fs module's own `write`
    const writes = vi.spyOn(fs, 'write');
    onTestFinished(() => writes.mockRestore());
    const sink = logDestination(fd, { flushMs: 20 });
    await sleep(200);
    expect(writes).not.toHaveBeenCalled();
    sink.write('{"msg":"one"}\n');
    await sleep(200);
    expect(await readFile(join(dir, 'log'), 'utf8')).toBe('{"msg":"one"}\n');
    const after = writes.mock.calls.length;
    expect(after).toBeGreaterThan(0);
    await sleep(200);
    expect(writes.mock.calls.length, 'writes after the line went out').toBe(after);
  });

  it('flushes to a file without fsync, and writes the lines that arrive while a write is in flight', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'log-destination-'));
    const fd = fs.openSync(join(dir, 'log'), 'w');
    onTestFinished(async () => {
      fs.closeSync(fd);
      await rm(dir, { recursive: true, force: true });
    });
    const fsyncs = vi.spyOn(fs, 'fsync');
    onTestFinished(() => fsyncs.mockRestore());
    const sink = logDestination(fd, { flushMs: 20 });
    const lines = Array.from({ length: 50 }, (_, n) => `{"n":${n}}\n`);
    for (const [n, line] of lines.entries()) {
      sink.write(line);
      // Some lines land while the timer's write is in flight, some between writes.
      if (n % 10 === 9) await sleep(21);
    }
    await sleep(300);
    expect(await readFile(join(dir, 'log'), 'utf8')).toBe(lines.join(''));
    expect(fsyncs, 'a log flush is not a disk sync').not.toHaveBeenCalled();
  });

  it('exits promptly when the reader goes away right after the signal (EPIPE)', async () => {
    const w = start(10);
    await w.stderr('ready');
    w.child.kill('SIGTERM');
    w.child.stdout.destroy();
    expect(await w.exitWithin(3000)).toBe(0);
  });

  it('exits promptly, dropping what it cannot write, when nobody reads and the pipe is full', async () => {
    // 2 MB of lines: far past a pipe's buffer, so the last synchronous flush meets a full pipe.
    const w = start(10_000);
    w.child.stdout.pause();
    await w.stderr('ready');
    const started = Date.now();
    w.child.kill('SIGTERM');
    expect(await w.exitWithin(5000)).toBe(0);
    await w.stderr('exiting failed=true');
    expect(Date.now() - started).toBeLessThan(3000);
  });
});
