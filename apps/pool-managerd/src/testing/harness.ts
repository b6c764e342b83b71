import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import pino, { type Logger } from 'pino';
import { request } from 'undici';
import type { z } from 'zod';
import {
  DispatchEventSchema,
  OnDemandConfigSchema,
  PoolConfigSchema,
  type DispatchEvent,
  type PoolConfigInput,
  type PoolState,
  type PoolStatus,
} from '@llama-orch/contracts';
import { EngineProvisioner, ensureCpuTestEngine, scrubEngineEnv, testCacheDir } from '@llama-orch/engine-provisioner';
import { ensureSourceTree } from '@llama-orch/llamacpp-source';
import { ModelProvisioner, SYNTHETIC_VOCAB_FILE } from '@llama-orch/model-provisioner';
import { buildApp, type PoolManagerApp } from '../app.js';
import { DEFAULT_SUPERVISION, type SupervisionSettings } from '../supervision/settings.js';
import { PoolManager, type PoolManagerOptions } from '../pools/pool-manager.js';
import { claimRuntimeDir, runtimeDir, type RuntimeDir } from '../support/runtime-dir.js';
import { detectPdeathsigWrapper } from '../support/setpriv.js';

/**
 * Test support: a whole pool-managerd in-process (PoolManager + HTTP app on a real loopback port)
 * over the shared test cache (real llama-server, synthetic model) and a temp runtime dir. Logs are
 * captured as parsed JSON lines. Reads process.env on purpose (test entry point).
 */
export interface Harness {
  dir: string;
  runtime: RuntimeDir;
  manager: PoolManager;
  app: PoolManagerApp;
  url: string;
  token: string;
  logs: Array<Record<string, unknown>>;
  /** The logger whose lines land in {@link logs} (e.g. for a second app on the same manager). */
  logger: Logger;
  /** Every pool state change seen, in order (the transition recorder). */
  transitions: RecordedTransition[];
  /** Log lines that report an InvalidTransitionError: a refused transition anywhere in the daemon. */
  illegalTransitions(): Array<Record<string, unknown>>;
  /** Closes everything; throws when an illegal transition was logged meanwhile. */
  close(): Promise<void>;
}

export interface RecordedTransition {
  pool_id: string;
  from: PoolState;
  to: PoolState;
  reason: string | undefined;
}

export const TEST_TOKEN = 'pool-managerd-test-token-0123456789';

export interface HarnessOptions {
  pools: PoolConfigInput[];
  supervision?: Partial<SupervisionSettings>;
  engines?: PoolManagerOptions['engines'];
  nodeId?: string;
  start?: boolean;
  /** Build/locate the real llama-server first (off for fixture-only engines). @default true */
  realEngine?: boolean;
  /** Passed to the PoolManager (readiness published only after it settles). @default settled */
  serving?: Promise<void>;
  /** The node's `on_demand` section (parsed with its defaults): loads on request are accepted. */
  onDemand?: z.input<typeof OnDemandConfigSchema>;
  /**
   * Models in a cache of this harness's own (removed at close) instead of the shared test cache, so
   * a model is surely not on the host yet (synthetic models generated there from the shared
   * llama.cpp tree's vocab). @default false
   */
  ownModelCache?: boolean;
}

export async function startHarness(opts: HarnessOptions): Promise<Harness> {
  const logs: Array<Record<string, unknown>> = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      for (const line of chunk.toString('utf8').split('\n'))
        if (line !== '') logs.push(JSON.parse(line) as Record<string, unknown>);
      cb();
    },
  });
  const logger = pino({ level: process.env.LOG_LEVEL ?? 'debug' }, sink);
  if (opts.realEngine !== false) await ensureCpuTestEngine(logger);
  const dir = mkdtempSync(join(tmpdir(), 'pool-managerd-'));
  const runtime = runtimeDir(join(dir, 'run'));
  const release = claimRuntimeDir(runtime);
  const engines =
    opts.engines ?? new EngineProvisioner({ cacheDir: testCacheDir(), logger, env: process.env, logProgress: false });
  const models = new ModelProvisioner({
    cacheDir: opts.ownModelCache === true ? join(dir, 'model-cache') : testCacheDir(),
    logger,
    progressTty: false,
    baseDir: dir,
    ...(opts.ownModelCache === true
      ? {
          vocabPath: join(
            (await ensureSourceTree({ cacheDir: testCacheDir(), source: { kind: 'bundle' } })).dir,
            SYNTHETIC_VOCAB_FILE,
          ),
        }
      : {}),
  });
  const manager = new PoolManager({
    nodeId: opts.nodeId ?? 'test-node',
    pools: opts.pools.map((p) => PoolConfigSchema.parse(p)),
    runtime,
    logger,
    engines,
    models,
    engineEnv: scrubEngineEnv(process.env),
    wrapper: (await detectPdeathsigWrapper()) ?? [],
    supervision: { ...DEFAULT_SUPERVISION, ...opts.supervision },
    externalProbeMs: 200,
    adoptTimeoutMs: 3000,
    handoffStabilityMs: 50,
    ...(opts.serving !== undefined ? { serving: opts.serving } : {}),
    ...(opts.onDemand !== undefined ? { onDemand: OnDemandConfigSchema.parse(opts.onDemand) } : {}),
  });
  const transitions: RecordedTransition[] = [];
  manager.pools.onChange((poolId, change) => {
    if (change !== undefined)
      transitions.push({ pool_id: poolId, from: change.from, to: change.to, reason: change.reason });
  });
  const illegalTransitions = (): Array<Record<string, unknown>> =>
    logs.filter((l) => (l.err as { type?: unknown } | undefined)?.type === 'InvalidTransitionError');
  const app = await buildApp(
    { manager, logger, apiToken: TEST_TOKEN },
    { node: { id: opts.nodeId ?? 'test-node', addr: '127.0.0.1:0' } },
  );
  await app.listen({ host: '127.0.0.1', port: 0 });
  const addr = app.server.address();
  const url = `http://127.0.0.1:${typeof addr === 'object' && addr !== null ? addr.port : 0}`;
  if (opts.start !== false) await manager.start();
  let closed = false;
  return {
    dir,
    runtime,
    manager,
    app,
    url,
    token: TEST_TOKEN,
    logs,
    logger,
    transitions,
    illegalTransitions,
    close: async () => {
      if (closed) return;
      closed = true;
      try {
        await manager.close();
      } finally {
        await app.close();
        await models.close();
        release();
        rmSync(dir, { recursive: true, force: true });
      }
      const illegal = illegalTransitions();
      if (illegal.length > 0)
        throw new Error(`illegal pool state transitions were attempted: ${JSON.stringify(illegal.map((l) => l.err))}`);
    },
  };
}

export async function until<T>(
  probe: () => T | Promise<T>,
  what: string,
  ms = 60_000,
  everyMs = 10,
): Promise<NonNullable<T>> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await probe();
    if (v !== undefined && v !== null && v !== false) return v as NonNullable<T>;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

export async function poolStatus(h: Harness, poolId: string): Promise<PoolStatus> {
  const res = await request(`${h.url}/v2/pools/${poolId}`, { headers: { authorization: `Bearer ${h.token}` } });
  return (await res.body.json()) as PoolStatus;
}

export async function waitReady(h: Harness, poolId: string, ms = 120_000): Promise<PoolStatus> {
  return until(
    async () => {
      const s = await poolStatus(h, poolId);
      return s.ready ? s : undefined;
    },
    `pool ${poolId} ready`,
    ms,
    20,
  );
}

/** Opens a dispatch; returns the HTTP status and an iterator of parsed NDJSON events. */
export async function dispatch(
  h: Harness,
  poolId: string,
  body: Record<string, unknown>,
): Promise<{
  status: number;
  headers: Record<string, string | string[] | undefined>;
  events: AsyncGenerator<DispatchEvent>;
  json?: unknown;
  destroy: () => void;
}> {
  const res = await request(`${h.url}/v2/pools/${poolId}/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${h.token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ task_id: crypto.randomUUID(), ...body }),
    reset: true,
  });
  if (res.statusCode !== 200) {
    return {
      status: res.statusCode,
      headers: res.headers,
      json: await res.body.json(),
      events: (async function* () {})(),
      destroy: () => undefined,
    };
  }
  return { status: 200, headers: res.headers, events: ndjsonEvents(res.body), destroy: () => res.body.destroy() };
}

/** The DispatchEvents of an NDJSON body, parsed line by line. */
export async function* ndjsonEvents(body: AsyncIterable<unknown>): AsyncGenerator<DispatchEvent> {
  let buf = '';
  for await (const chunk of body) {
    buf += (chunk as Buffer).toString('utf8');
    let nl: number;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      if (line !== '') yield DispatchEventSchema.parse(JSON.parse(line));
    }
  }
  if (buf !== '') throw new Error(`partial NDJSON line at end: ${buf}`);
}

export async function collect(events: AsyncIterable<DispatchEvent>): Promise<DispatchEvent[]> {
  const out: DispatchEvent[] = [];
  for await (const e of events) out.push(e);
  return out;
}

export function textOf(events: DispatchEvent[]): string {
  return events.flatMap((e) => (e.type === 'token' ? [e.t] : [])).join('');
}

/** Measurements go to stderr so test output shows them. */
export function report(line: string): void {
  process.stderr.write(`[measure] ${line}\n`);
}
