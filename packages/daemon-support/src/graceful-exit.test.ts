import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { describe, expect, it, onTestFinished } from 'vitest';
import { FORCED_EXIT_CODE, STOPPING_MESSAGE } from './graceful-exit.js';

// Process-level: signals are delivered by the kernel to a real process running the built package.
const DAEMON = fileURLToPath(new URL('./fixtures/graceful-daemon.mjs', import.meta.url));

interface Run {
  code: number | null;
  lines: Array<{ level: number; msg: string; human?: string; signal?: string }>;
}

/** Starts the fixture, sends `signals` (the later ones while the shutdown runs), waits for the exit. */
async function run(signals: NodeJS.Signals[], shutdownMs = 600): Promise<Run> {
  const child = spawn(process.execPath, [DAEMON, String(shutdownMs)], { stdio: ['ignore', 'pipe', 'pipe'] });
  onTestFinished(() => {
    child.kill('SIGKILL');
  });
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => {
    out += d;
  });
  await new Promise<void>((resolve) => {
    child.stderr.setEncoding('utf8').on('data', (d: string) => {
      if (d.includes('ready')) resolve();
    });
  });
  const exited = once(child, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
  for (const [i, s] of signals.entries()) {
    child.kill(s);
    // the first signal's shutdown is under way (its first step logged) before the next one
    if (i === 0) while (!out.includes('step: engines')) await new Promise((r) => setTimeout(r, 10));
  }
  const [code] = await exited;
  return {
    code,
    lines: out
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Run['lines'][number]),
  };
}

describe('installGracefulExit', () => {
  it('first SIGINT: narrates how to force, runs the whole shutdown, exits 0', async () => {
    const r = await run(['SIGINT']);
    expect(r.code).toBe(0);
    expect(r.lines[0]).toMatchObject({ level: 30, msg: 'shutting down', signal: 'SIGINT', human: STOPPING_MESSAGE });
    expect(r.lines.map((l) => l.msg)).toEqual(['shutting down', 'step: engines', 'stopped']);
  });

  it('a SIGTERM while stopping (the same Ctrl-C relayed by a parent) is no error and skips nothing', async () => {
    const r = await run(['SIGINT', 'SIGTERM']);
    expect(r.code).toBe(0);
    expect(r.lines.map((l) => l.msg)).toEqual(['shutting down', 'step: engines', 'already stopping', 'stopped']);
    expect(r.lines.filter((l) => l.level >= 40)).toEqual([]);
  });

  it('SIGTERM twice (a supervisor repeating itself): the shutdown still finishes, exit 0', async () => {
    const r = await run(['SIGTERM', 'SIGTERM']);
    expect(r.code).toBe(0);
    expect(r.lines[0]).toMatchObject({ msg: 'shutting down', human: 'stopping' });
    expect(r.lines.at(-1)?.msg).toBe('stopped');
  });

  it("the operator's second Ctrl-C forces: a warning and exit 130 before the shutdown ends", async () => {
    const r = await run(['SIGINT', 'SIGINT'], 5000);
    expect(r.code).toBe(FORCED_EXIT_CODE);
    expect(r.lines.map((l) => l.msg)).not.toContain('stopped');
    expect(r.lines.at(-1)).toMatchObject({ level: 40, signal: 'SIGINT' });
  });
});
