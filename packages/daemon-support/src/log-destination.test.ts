import { spawn, type ChildProcessByStdio } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import type { Readable } from 'node:stream';
import { describe, expect, it, onTestFinished } from 'vitest';

// Process-level: a sink's failure modes only show on a real pipe between two processes.
const WRITER = fileURLToPath(new URL('./fixtures/log-writer.mjs', import.meta.url));

function start(lines: number): ChildProcessByStdio<null, Readable, Readable> {
  const child = spawn(process.execPath, [WRITER, String(lines)], { stdio: ['ignore', 'pipe', 'pipe'] });
  onTestFinished(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  return child;
}

async function stderrLine(child: ChildProcessByStdio<null, Readable, Readable>, text: string): Promise<string> {
  let seen = '';
  for await (const chunk of child.stderr) {
    seen += String(chunk);
    if (seen.includes(text)) return seen;
  }
  throw new Error(`stderr ended without '${text}': ${seen}`);
}

async function exitWithin(child: ChildProcessByStdio<null, Readable, Readable>, ms: number): Promise<number | null> {
  const timer = setTimeout(() => child.kill('SIGKILL'), ms);
  const [code, signal] = (await once(child, 'exit')) as [number | null, string | null];
  clearTimeout(timer);
  expect(signal, `killed after ${ms} ms: the sink blocked the process`).toBeNull();
  return code;
}

describe('logDestination', () => {
  it('loses no line to a slow reader', async () => {
    const child = start(5000);
    child.stdout.pause();
    await stderrLine(child, 'ready');
    let out = '';
    child.stdout.on('data', (c: Buffer) => {
      out += c.toString('utf8');
    });
    child.stdout.resume();
    child.kill('SIGTERM');
    expect(await exitWithin(child, 10_000)).toBe(0);
    await once(child.stdout, 'end').catch(() => undefined);
    const numbers = out.split('\n').filter((l) => l.startsWith('{"n"')).map((l) => (JSON.parse(l) as { n: number }).n);
    expect(numbers).toEqual(Array.from({ length: 5000 }, (_, i) => i));
    expect(out.trimEnd().endsWith('{"msg":"stopped"}')).toBe(true);
  });

  it('exits promptly when the reader goes away right after the signal (EPIPE)', async () => {
    const child = start(10);
    await stderrLine(child, 'ready');
    child.kill('SIGTERM');
    child.stdout.destroy();
    const stderr = stderrLine(child, 'exiting');
    expect(await exitWithin(child, 3000)).toBe(0);
    await stderr.catch(() => undefined);
  });

  it('exits promptly when nobody reads and the pipe is full', async () => {
    // 2 MB of lines: far past a pipe's 64 KB, so the last synchronous flush meets a full pipe.
    const child = start(10_000);
    child.stdout.pause();
    await stderrLine(child, 'ready');
    const started = Date.now();
    child.kill('SIGTERM');
    const stderr = stderrLine(child, 'exiting failed=true');
    expect(await exitWithin(child, 5000)).toBe(0);
    expect(await stderr).toContain('failed=true');
    expect(Date.now() - started).toBeLessThan(3000);
  });
});
