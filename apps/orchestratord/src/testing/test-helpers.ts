// Test-only helpers (imported by *.test.ts files only).
import { randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import {
  OrchestratorConfigSchema,
  type OrchestratorConfig,
  type NodeMemory,
  type PoolSnapshot,
  type TaskRequestInput,
} from '@llama-orch/contracts';
import { Agent, request as undiciRequest } from 'undici';
import { buildApp, type AppDeps, type AppTuning, type OrchdApp } from '../app.js';
import { createUpstreamDispatchers } from '../upstream/dispatchers.js';
import { pino, type Logger } from 'pino';
import { expect } from 'vitest';
import type { Clock } from '@llama-orch/daemon-support';
import { storeSettingsOf, type ClusterStore } from '../store/cluster-store.js';
import type { StoreHarness, StoreKind } from './store-harness.js';

export class ManualClock implements Clock {
  constructor(public t = 1_700_000_000_000) {}
  now(): number {
    return this.t;
  }
  advance(ms: number): void {
    this.t += ms;
  }
}

/** A pino logger whose JSON lines are kept in `lines` (and parsed in `records`). */
export function captureLogger(level = 'debug'): {
  logger: Logger;
  lines: string[];
  records: () => Record<string, unknown>[];
} {
  const lines: string[] = [];
  const dest = new Writable({
    write(chunk: Buffer, _enc, cb) {
      for (const l of chunk.toString('utf8').split('\n')) if (l.trim() !== '') lines.push(l);
      cb();
    },
  });
  const logger = pino({ level }, dest);
  return { logger, lines, records: () => lines.map((l) => JSON.parse(l) as Record<string, unknown>) };
}

export function snapshot(over: Partial<PoolSnapshot> & { pool_id: string }): PoolSnapshot {
  return {
    state: 'ready',
    ready: true,
    draining: false,
    slots_total: 1,
    slots_free: 1,
    models: ['m'],
    engine_version: 'v1',
    ctx: 4096,
    deterministic: false,
    decode_tps: 0,
    ...over,
  };
}

export async function waitFor(cond: () => boolean, timeoutMs = 10_000, what = 'condition'): Promise<void> {
  const start = Date.now();
  while (!cond()) {
    if (Date.now() - start > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

export const TOKEN = 'test-token-0123456789abcdef';

export function taskBody(over: Partial<TaskRequestInput> = {}): TaskRequestInput {
  return {
    task_id: randomUUID(),
    session_id: randomUUID(),
    workload: 'completion',
    model_ref: 'm',
    engine: 'llamacpp',
    ctx: 0,
    priority: 'interactive',
    prompt: 'hello',
    max_tokens: 4,
    deadline_ms: 60_000,
    ...over,
  };
}

export interface TestApp {
  app: OrchdApp;
  agent: Agent;
  logs: ReturnType<typeof captureLogger>;
  config: OrchestratorConfig;
  auth: Record<string, string>;
  close(): Promise<void>;
}

/** Deps a test may set besides the logger, dispatchers and clock. */
export type ExtraDeps = Pick<AppDeps, 'dashboardDir' | 'version'> & {
  /** Opens the app's cluster store for its parsed config (closed by the caller's harness). @default the in-process store */
  store?: (config: OrchestratorConfig) => Promise<ClusterStore>;
};

/** `extra.store` for a store harness of either kind: in-process → today's default (none passed). */
export function storeOf(kind: StoreKind, harness: StoreHarness): ExtraDeps {
  if (kind === 'memory') return {};
  return {
    store: async (config) => {
      // The harness picks the URL and a fresh prefix; the rest as the app's config says.
      const { redis_url: _url, redis_prefix: _prefix, ...settings } = storeSettingsOf(config);
      return (await harness.open(1, settings))[0] as ClusterStore;
    },
  };
}

/**
 * buildApp with a captured logger, the real upstream dispatchers and config overrides (parsed like
 * env values). `http1` replaces the HTTP/1.1 upstream agent (closed with the app).
 */
export async function makeApp(
  over: Partial<Record<keyof OrchestratorConfig, unknown>> = {},
  tuning: AppTuning = {},
  clock?: Clock,
  http1?: Agent,
  extra: ExtraDeps = {},
): Promise<TestApp> {
  const config = OrchestratorConfigSchema.parse({ api_token: TOKEN, heartbeat_interval_ms: 1000, ...over });
  const logs = captureLogger();
  const upstream = createUpstreamDispatchers();
  const agent = http1 ?? upstream.http1;
  const { store: openStore, ...deps } = extra;
  const store = openStore === undefined ? undefined : await openStore(config);
  const app = await buildApp(
    {
      logger: logs.logger,
      upstream: agent,
      upstreamH2c: upstream.h2c,
      ...(clock ? { clock } : {}),
      ...deps,
      ...(store ? { store } : {}),
    },
    config,
    tuning,
  );
  const auth: Record<string, string> =
    config.api_token === undefined ? {} : { authorization: `Bearer ${config.api_token}` };
  let closing: Promise<void> | undefined;
  return {
    app,
    agent,
    logs,
    config,
    auth,
    close: () => {
      closing ??= (async () => {
        await app.close();
        await upstream.close();
        if (http1 !== undefined) await http1.close();
      })();
      return closing;
    },
  };
}

/**
 * Registers a node and sends its first heartbeat (→ online) through the routes; `memory` makes it a
 * node that loads models on request (spec 67).
 */
export async function registerNode(
  t: TestApp,
  nodeId: string,
  pools: PoolSnapshot[],
  address = 'http://127.0.0.1:9',
  memory?: NodeMemory,
): Promise<void> {
  const reg = await t.app.inject({
    method: 'POST',
    url: '/v2/nodes/register',
    headers: t.auth,
    payload: {
      node_id: nodeId,
      machine_id: nodeId,
      address,
      pools,
      capabilities: { gpus: [], cpu_cores: 1, ram_total_bytes: 1 },
      version: 'x',
      ...(memory !== undefined ? { memory } : {}),
    },
  });
  expect(reg.statusCode).toBe(200);
  await heartbeatNode(t, nodeId, pools, memory);
}

/** One heartbeat of a registered node through the routes, as pool-managerd sends it. */
export async function heartbeatNode(
  t: TestApp,
  nodeId: string,
  pools: PoolSnapshot[],
  memory?: NodeMemory,
): Promise<void> {
  const hb = await t.app.inject({
    method: 'POST',
    url: `/v2/nodes/${nodeId}/heartbeat`,
    headers: t.auth,
    payload: { timestamp: new Date().toISOString(), pools, ...(memory !== undefined ? { memory } : {}) },
  });
  expect(hb.statusCode).toBe(200);
}

/** Parses an SSE body into frames (comments skipped). */
export function frames(body: string): { id: number; event: string; data: Record<string, unknown> }[] {
  return body
    .split('\n\n')
    .filter((b) => b.startsWith('id:'))
    .map((block) => {
      const lines = block.split('\n');
      return {
        id: Number(lines[0]?.slice(4)),
        event: String(lines[1]?.slice(7)),
        data: JSON.parse(String(lines[2]?.slice(6))) as Record<string, unknown>,
      };
    });
}

export interface SseFrameRecord {
  id: number;
  event: string;
  data: Record<string, unknown>;
}

/** A live SSE subscription over a real socket (undici), parsed incrementally. */
export interface SseClient {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly frames: SseFrameRecord[];
  /** Everything received, comments included. */
  raw: string;
  /** Resolves when the server ends the response (or the client aborts). */
  readonly done: Promise<void>;
  ended: boolean;
  /** Closes the connection from the client side. */
  abort(): void;
  waitForFrame(pred: (f: SseFrameRecord) => boolean, timeoutMs?: number): Promise<SseFrameRecord>;
}

export async function openSse(url: string, headers: Record<string, string> = {}): Promise<SseClient> {
  const controller = new AbortController();
  const res = await undiciRequest(url, {
    method: 'GET',
    headers: { accept: 'text/event-stream', ...headers },
    signal: controller.signal,
  });
  let buffered = '';
  const client: SseClient = {
    status: res.statusCode,
    headers: res.headers,
    frames: [],
    raw: '',
    ended: false,
    done: Promise.resolve(),
    abort: () => controller.abort(),
    waitForFrame: async (pred, timeoutMs = 10_000) => {
      let found: SseFrameRecord | undefined;
      await waitFor(() => (found = client.frames.find(pred)) !== undefined || client.ended, timeoutMs, 'an SSE frame');
      found ??= client.frames.find(pred);
      if (found === undefined)
        throw new Error(
          `stream ended without the expected frame; got ${JSON.stringify(client.frames.map((f) => f.event))}`,
        );
      return found;
    },
  };
  (client as { done: Promise<void> }).done = (async () => {
    try {
      for await (const chunk of res.body) {
        const text = (chunk as Buffer).toString('utf8');
        client.raw += text;
        buffered += text;
        let idx = buffered.indexOf('\n\n');
        while (idx >= 0) {
          const block = buffered.slice(0, idx);
          buffered = buffered.slice(idx + 2);
          if (block.startsWith('id:')) client.frames.push(...frames(`${block}\n\n`));
          idx = buffered.indexOf('\n\n');
        }
      }
    } catch {
      // aborted by the client
    } finally {
      client.ended = true;
    }
  })();
  return client;
}
