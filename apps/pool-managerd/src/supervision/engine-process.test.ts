import { existsSync, mkdtempSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pino from 'pino';
import { PoolConfigSchema } from '@llama-orch/contracts';
import { EngineProvisioner, ensureCpuTestEngine, scrubEngineEnv, testCacheDir } from '@llama-orch/engine-provisioner';
import { ModelProvisioner } from '@llama-orch/model-provisioner';
import { LlamaServerClient, type EngineHealth } from '@llama-orch/llamacpp-adapter';
import { EngineProcess } from './engine-process.js';
import { EngineReadinessError, EngineSpawnError } from '../errors.js';
import { processCmdline } from '../support/pid-files.js';
import { detectPdeathsigWrapper } from '../support/setpriv.js';

const HANGING = fileURLToPath(new URL('../fixtures/hanging-engine.mjs', import.meta.url));
const ANNOUNCING = fileURLToPath(new URL('../fixtures/announcing-engine.mjs', import.meta.url));
const logger = pino({ level: 'silent' });
let dir: string;
let binary: string;
let modelPath: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'engine-proc-'));
  binary = (await ensureCpuTestEngine(logger)).binary_path;
  const models = new ModelProvisioner({ cacheDir: testCacheDir(), logger, progressTty: false });
  modelPath = (await models.ensure('synthetic:llama')).local_path;
  await models.close();
}, 45 * 60_000);
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

async function realEngine(
  name: string,
): Promise<{ proc: EngineProcess; client: LlamaServerClient; seen: EngineHealth[] }> {
  const provisioner = new EngineProvisioner({ cacheDir: testCacheDir(), logger, env: process.env, logProgress: false });
  const prepared = await provisioner.prepare(
    PoolConfigSchema.parse({ id: name, model: 'synthetic:llama', ctx: 256, threads: 1 }),
    { modelPath, replicaId: 'r0' },
  );
  const client = new LlamaServerClient({ baseUrl: `http://${prepared.host}:${prepared.port}` });
  const seen: EngineHealth[] = [];
  const proc = new EngineProcess({
    name: `${name}-r0`,
    poolId: name,
    replicaId: 'r0',
    binaryPath: prepared.binary_path,
    args: prepared.flags,
    env: scrubEngineEnv(process.env),
    health: async (signal) => {
      const h = await client.health(signal);
      if (seen.at(-1) !== h) seen.push(h);
      return h;
    },
    logDir: join(dir, 'logs'),
    pidDir: join(dir, 'pids'),
    logger,
    wrapper: (await detectPdeathsigWrapper()) ?? [],
    readinessIntervalMs: 5,
  });
  return { proc, client, seen };
}

/**
 * Starts a real engine; a port taken by another process between picking it and the engine's bind
 * (other suites run in parallel on this machine) is retried on a new port — the supervisor does
 * the same in production by preparing each attempt afresh.
 */
async function startedEngine(name: string): Promise<Awaited<ReturnType<typeof realEngine>>> {
  for (let attempt = 1; ; attempt++) {
    const e = await realEngine(name);
    try {
      await e.proc.start();
      return e;
    } catch (err) {
      await e.client.close();
      if (attempt >= 3 || !(err instanceof EngineReadinessError) || !/couldn't bind/.test(err.message)) throw err;
    }
  }
}

describe('EngineProcess', () => {
  it('spawns the real llama-server, is ready after /health 200, stops with SIGTERM (exit 0), idempotently', async () => {
    const { proc, client, seen } = await startedEngine('ep1');
    expect(proc.state).toBe('ready');
    expect(seen.at(-1)).toBe('ready');
    const pid = proc.pid ?? 0;
    expect(processCmdline(pid)?.[0]).toBe(binary); // setpriv exec'd in place: the pid is the engine's
    // The engine writes its own log: its stdout and stderr are the log file, not pipes to us.
    expect([readlinkSync(`/proc/${pid}/fd/1`), readlinkSync(`/proc/${pid}/fd/2`)]).toEqual([
      proc.logPath,
      proc.logPath,
    ]);
    expect(readFileSync(proc.logPath, 'utf8')).toMatch(/listening on http/);
    const pidFile = JSON.parse(readFileSync(join(dir, 'pids', 'ep1-r0.pid'), 'utf8')) as { pid: number };
    expect(pidFile.pid).toBe(pid);
    expect(await client.health()).toBe('ready');
    const a = proc.stop('SIGTERM', 5000);
    const b = proc.stop('SIGKILL', 1);
    expect(b).toBe(a);
    const exit = await a;
    expect(exit).toMatchObject({ code: 0, signal: null, requested: true });
    expect(proc.state).toBe('exited');
    await new Promise((r) => setTimeout(r, 50));
    expect(existsSync(join(dir, 'pids', 'ep1-r0.pid'))).toBe(false);
    expect(readFileSync(proc.logPath, 'utf8')).toMatch(/exit code=0/);
    await expect(proc.start()).rejects.toBeInstanceOf(EngineSpawnError); // never restarted
    await client.close();
  });

  it('records an unrequested exit (kill -9)', async () => {
    const { proc, client } = await startedEngine('ep2');
    const exits: unknown[] = [];
    proc.onExit((e) => exits.push(e));
    process.kill(proc.pid ?? 0, 'SIGKILL');
    const exit = await proc.exited;
    expect(exit).toMatchObject({ code: null, signal: 'SIGKILL', requested: false });
    expect(exits).toHaveLength(1);
    await client.close();
  });

  it('probes /health as soon as the engine announces it listens (split across reads), not at the next poll tick', async () => {
    const probes: string[] = [];
    const spawned: number[] = [];
    const proc: EngineProcess = new EngineProcess({
      name: 'announce-r0',
      poolId: 'announce',
      replicaId: 'r0',
      binaryPath: ANNOUNCING,
      args: [],
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
      // "Healthy" once the announcement is out: only a probe after it can succeed.
      health: async () => {
        const h = proc.outputTail().includes('listening on http://') ? 'ready' : 'loading';
        probes.push(h);
        return h;
      },
      logDir: join(dir, 'logs'),
      pidDir: join(dir, 'pids'),
      logger,
      // A poll tick far beyond the test timeout: only the announcement can end the wait in time.
      readinessIntervalMs: 600_000,
      onSpawn: (pid) => spawned.push(pid),
    });
    await proc.start();
    expect(proc.state).toBe('ready');
    expect(spawned).toEqual([proc.pid]);
    expect(probes[0]).toBe('loading'); // the probe at spawn, before the announcement
    expect(probes.at(-1)).toBe('ready');
    expect((await proc.stop('SIGTERM', 2000)).requested).toBe(true);
  });

  it('a hung engine fails readiness on timeout and is killed; stop escalates SIGTERM → SIGKILL', async () => {
    const make = (timeout: number): EngineProcess =>
      new EngineProcess({
        name: 'hang-r0',
        poolId: 'hang',
        replicaId: 'r0',
        binaryPath: HANGING,
        args: [],
        env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
        health: async () => 'loading',
        logDir: join(dir, 'logs'),
        pidDir: join(dir, 'pids'),
        logger,
        readinessTimeoutMs: timeout,
      });
    const p1 = make(300);
    await expect(p1.start()).rejects.toBeInstanceOf(EngineReadinessError);
    expect(p1.exit?.signal).toBe('SIGKILL');
    expect(processCmdline(p1.pid ?? 0)).toBeUndefined();

    const p2 = make(60_000);
    const started = p2.start().catch((e: unknown) => e);
    await new Promise((r) => setTimeout(r, 300));
    const t0 = Date.now();
    const exit = await p2.stop('SIGTERM', 300);
    expect(exit).toMatchObject({ signal: 'SIGKILL', requested: true });
    expect(Date.now() - t0).toBeGreaterThanOrEqual(250);
    expect(readFileSync(p2.logPath, 'utf8')).toMatch(/ignoring SIGTERM/);
    expect(await started).toBeInstanceOf(EngineReadinessError);
  });

  it("a load failure names this process's last output lines (not an earlier run's, not the exit line); a spawn failure its cause", async () => {
    const make = (name: string, binaryPath: string, args: string[]): EngineProcess =>
      new EngineProcess({
        name,
        poolId: 'fail',
        replicaId: 'r0',
        binaryPath,
        args,
        env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
        health: async () => 'loading',
        logDir: join(dir, 'logs'),
        pidDir: join(dir, 'pids'),
        logger,
      });
    // Two runs into the same log file: the second run's error must quote only its own output.
    await expect(make('fail-r0', '/bin/sh', ['-c', 'echo first run; exit 2']).start()).rejects.toThrow(
      /code 2.*first run/,
    );
    const second = make('fail-r0', '/bin/sh', ['-c', 'echo loading the model; echo out of memory >&2; exit 1']).start();
    await expect(second).rejects.toBeInstanceOf(EngineReadinessError);
    const message = ((await second.catch((e: unknown) => e)) as Error).message;
    expect(message).toBe('engine exited during load (code 1, signal null): loading the model | out of memory');
    expect(readFileSync(join(dir, 'logs', 'fail-r0.log'), 'utf8')).toMatch(
      /first run[\s\S]*out of memory\n=== \S+ exit code=1/,
    );
    await expect(make('missing-r0', join(dir, 'no-such-engine'), []).start()).rejects.toThrow(
      /could not spawn .*no-such-engine.*ENOENT/,
    );
  });
});
