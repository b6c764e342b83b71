import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { BackoffPolicy } from './backoff.js';
import { CircuitBreaker } from './circuit-breaker.js';
import type { SleepingClock as Clock } from '@llama-orch/daemon-support';
import { EngineProcess } from './engine-process.js';
import { EngineReadinessError } from '../errors.js';
import { RestartLimiter } from './restart-limiter.js';
import { Supervisor } from './supervisor.js';

const CRASHING = fileURLToPath(new URL('../fixtures/crashing-engine.mjs', import.meta.url));
const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** A clock whose sleeps return at once but are recorded; `now` advances by what was slept. */
function recordingClock(): Clock & { slept: number[]; t: number } {
  const c = {
    slept: [] as number[],
    t: 0,
    now: () => c.t,
    sleep: async (ms: number, signal?: AbortSignal) => {
      if (signal?.aborted === true) throw signal.reason;
      c.slept.push(ms);
      c.t += ms;
      await new Promise((r) => setImmediate(r));
    },
  };
  return c;
}

function crashingProcess(dir: string): EngineProcess {
  return new EngineProcess({
    name: 'crash-r0',
    poolId: 'crash',
    replicaId: 'r0',
    binaryPath: CRASHING,
    args: [],
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
    health: async () => 'down',
    logDir: join(dir, 'logs'),
    pidDir: join(dir, 'pids'),
    logger: pino({ level: 'silent' }),
  });
}

describe('Supervisor with an engine that always crashes (fixture)', () => {
  it('backs off exponentially, opens the breaker after 5 failures, half-opens after the cool-down', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sup-'));
    dirs.push(dir);
    const clock = recordingClock();
    const created: EngineProcess[] = [];
    const failures: Array<{ error: string; delayMs: number | undefined }> = [];
    const opens: number[] = [];
    const sup = new Supervisor({
      name: 'crash-r0',
      logger: pino({ level: 'silent' }),
      clock,
      backoff: new BackoffPolicy({ baseMs: 10, maxMs: 1000, random: () => 0.5 }),
      breaker: new CircuitBreaker({ threshold: 5, cooldownMs: 500, clock }),
      limiter: new RestartLimiter({ max: 100, clock }),
      createProcess: () => {
        const proc = crashingProcess(dir);
        created.push(proc);
        return { proc, meta: undefined };
      },
    });
    sup.on('failure', (f) => failures.push({ error: f.error, delayMs: f.delayMs }));
    sup.on('open', ({ retryAt }) => opens.push(retryAt));
    void sup.start();
    const deadline = Date.now() + 30_000;
    while (opens.length < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    await sup.stop(1000);

    expect(opens.length).toBeGreaterThanOrEqual(2);
    // 4 restarts with doubling backoff, the 5th failure opens the circuit (no delay: it waits the cool-down).
    expect(failures.slice(0, 5).map((f) => f.delayMs)).toEqual([10, 20, 40, 80, undefined]);
    expect(clock.slept.slice(0, 5)).toEqual([10, 20, 40, 80, 500]);
    // The half-open trial failed: open again at once, without backoff.
    expect(failures[5]?.delayMs).toBeUndefined();
    expect(failures[0]?.error).toMatch(/exited during load \(code 1/);
    expect(failures[0]?.error).toMatch(/crashing-engine: exiting with code 1/);
    // Every attempt got a fresh process; none was reused.
    expect(new Set(created).size).toBe(created.length);
    expect(created.length).toBeGreaterThanOrEqual(6);
    expect(created.slice(0, 6).every((p) => p.state === 'exited' && p.exit?.code === 1)).toBe(true);
    expect(created.every((p) => p.state === 'exited')).toBe(true);
    expect(sup.state).toBe('stopped');
  });

  it('failFast reports the first failed start instead of restarting (reload trial)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sup-'));
    dirs.push(dir);
    let n = 0;
    const sup = new Supervisor({
      name: 'crash-r0',
      logger: pino({ level: 'silent' }),
      failFast: true,
      createProcess: () => {
        n += 1;
        return { proc: crashingProcess(dir), meta: undefined };
      },
    });
    await expect(sup.start()).rejects.toBeInstanceOf(EngineReadinessError);
    expect(n).toBe(1);
    expect(sup.state).toBe('stopped');
    await sup.stop();
  });
});
