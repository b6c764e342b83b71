import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import type { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import type { DispatchEvent, DispatchRequest } from '@llama-orch/contracts';
import { Agent, H2CClient, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AttemptAbort } from './attempt-abort.js';
import { readDispatchEvents } from './dispatch-events.js';
import { PoolClient, type DispatchTarget } from './pool-client.js';
import { DispatchGoneError, UpstreamConnectError } from './upstream-errors.js';

// PoolClient.reattach and cancelDispatch against a real pool-managerd process (its built
// dist/main.js, as the e2e harness runs it) with one real llama-server pool (synthetic model,
// 4096-token context), over HTTP/1.1 and h2c. Reads process.env on purpose (test entry point).
const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', '..');
const MAIN = join(REPO, 'apps', 'pool-managerd', 'dist', 'main.js');
const CACHE = resolve(process.env.LLORCH_TEST_CACHE_DIR ?? join(REPO, '.cache', 'llama-orch'));
const TOKEN = 'pool-client-reattach-token-0123456789';
const POOL = 'rc';

let dir: string;
let node: DispatchTarget;
let lines: Array<Record<string, unknown>>;
let stop: () => Promise<void>;
const agent = new Agent();
const h2cAgent = new Agent({ factory: (origin, opts) => new H2CClient(origin, opts) });
const http1 = new PoolClient({ dispatcher: agent, token: TOKEN });
// http1PerNode 0: every stream goes over h2c.
const h2c = new PoolClient({ dispatcher: agent, h2cDispatcher: h2cAgent, http1PerNode: 0, token: TOKEN });

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'orchd-reattach-'));
  const config = join(dir, 'pm.yaml');
  writeFileSync(
    config,
    `node:\n  id: reattach-node\n  addr: 127.0.0.1:0\nruntime_dir: ${join(dir, 'run')}\npools:\n  - id: ${POOL}\n    model: 'synthetic:llama?ctx=4096'\n    ctx: 4096\n    slots: 1\n    threads: 1\n`,
  );
  const child = spawn(process.execPath, [MAIN, '--config', config], {
    env: { ...process.env, LLORCH_CACHE_DIR: CACHE, LLORCH_API_TOKEN: TOKEN, LOG_LEVEL: 'info' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    await exited;
  };
  lines = [];
  createInterface({ input: child.stdout }).on('line', (line) => {
    try {
      lines.push(JSON.parse(line) as Record<string, unknown>);
    } catch {
      lines.push({ raw: line });
    }
  });
  const url = (await until(
    () => lines.find((l) => l.msg === 'listening')?.url,
    'pool-managerd listening',
    60_000,
  )) as string;
  const h2cPort = (await until(
    () => lines.find((l) => l.msg === 'dispatch listening (h2c)')?.port,
    'h2c listener',
    60_000,
  )) as number;
  node = { url, h2c: `http://127.0.0.1:${h2cPort}` };
  await until(
    async () => {
      const res = await request(`${url}/v2/pools/${POOL}`, { headers: { authorization: `Bearer ${TOKEN}` } });
      return ((await res.body.json()) as { ready?: boolean }).ready === true;
    },
    'pool ready',
    120_000,
  );
}, 10 * 60_000);

afterAll(async () => {
  await stop?.();
  await agent.close();
  await h2cAgent.close();
  rmSync(dir, { recursive: true, force: true });
});

async function until<T>(probe: () => T | Promise<T>, what: string, ms = 30_000): Promise<NonNullable<T>> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await probe();
    if (v !== undefined && v !== null && v !== false) return v as NonNullable<T>;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** A long greedy generation that runs to `maxTokens` unless cancelled (the end-of-text token, id 2, is banned). */
function longRun(taskId: string, maxTokens: number): DispatchRequest {
  return {
    task_id: taskId,
    workload: 'completion',
    prompt: 'Tell a long story',
    max_tokens: maxTokens,
    greedy: true,
    cache_prompt: false,
    sampling: { logit_bias: { 2: -100 } },
    reattach_ms: 10_000,
  };
}

/** Reads events until `stopAfter` tokens were seen (then the body is destroyed), or to the end. */
async function read(body: Readable, stopAfter = Infinity): Promise<DispatchEvent[]> {
  const out: DispatchEvent[] = [];
  await readDispatchEvents(body, (ev) => {
    out.push(ev);
    return out.length < stopAfter;
  });
  return out;
}

const indexes = (evs: DispatchEvent[]): number[] => evs.flatMap((e) => (e.type === 'token' ? [e.i] : []));
const range = (from: number, to: number): number[] => Array.from({ length: to - from }, (_, k) => from + k);

async function detached(taskId: string): Promise<void> {
  await until(
    () => lines.some((l) => l.task_id === taskId && l.msg === 'dispatch detached: waiting for a re-attach'),
    `task ${taskId} detached`,
    10_000,
  );
}

async function idle(): Promise<void> {
  await until(async () => {
    const res = await request(`${node.url}/v2/pools/${POOL}`, { headers: { authorization: `Bearer ${TOKEN}` } });
    return ((await res.body.json()) as { slots_free?: number }).slots_free === 1;
  }, 'slot free');
}

describe('PoolClient.reattach / cancelDispatch against a real pool-managerd', () => {
  for (const [name, client] of [
    ['HTTP/1.1', http1],
    ['h2c', h2c],
  ] as const) {
    it(`${name}: a dispatch dropped after 5 tokens is re-attached after the last index: every index once, one end`, async () => {
      const taskId = randomUUID();
      const head = await read(
        await client.dispatch(node, POOL, longRun(taskId, 400), new AttemptAbort(), `c-${taskId}`),
        5,
      );
      expect(indexes(head)).toEqual(range(0, 5));
      await detached(taskId);
      const tail = await read(await client.reattach(node, POOL, taskId, 4, new AttemptAbort(), `c-${taskId}`));
      expect(indexes([...head, ...tail])).toEqual(range(0, 400));
      expect(tail.at(-1)).toMatchObject({ type: 'end', tokens_out: 400, pool_id: POOL });
      // pool-managerd buffers its log lines up to 100 ms, and the held tokens can all arrive sooner.
      await until(
        () =>
          lines.some(
            (l) => l.task_id === taskId && l.msg === 'dispatch re-attached' && l.correlation_id === `c-${taskId}`,
          ),
        're-attached line',
        5_000,
      );
      await idle();
      // Written out is not delivered (an orchestratord killed then is taken over later): still held for half the window; cancelled, it is gone.
      const again = await read(await client.reattach(node, POOL, taskId, 398, new AttemptAbort()));
      expect(indexes(again)).toEqual([399]);
      expect(await client.cancelDispatch(node, POOL, taskId)).toBe(true);
      const gone = await client.reattach(node, POOL, taskId, -1, new AttemptAbort()).catch((e: unknown) => e);
      expect(gone).toBeInstanceOf(DispatchGoneError);
      expect(gone).toMatchObject({ poolId: POOL, taskId });
    });
  }

  it('cancelDispatch: true for an attached dispatch (its stream ends with end stop_type cancel), then false; false for an unknown task', async () => {
    const taskId = randomUUID();
    const body = await http1.dispatch(node, POOL, longRun(taskId, 3800), new AttemptAbort());
    const events: DispatchEvent[] = [];
    let firstToken!: () => void;
    const started = new Promise<void>((r) => (firstToken = r));
    const reading = readDispatchEvents(body, (ev) => {
      events.push(ev);
      firstToken();
      return true;
    });
    await started;
    expect(await http1.cancelDispatch(node, POOL, taskId, `c-${taskId}`)).toBe(true);
    await reading;
    expect(events.at(-1)).toMatchObject({ type: 'end', stop_type: 'cancel' });
    const last = events.at(-1);
    expect(last?.type === 'end' ? last.tokens_out : -1).toBeLessThan(3800);
    await idle();
    expect(await http1.cancelDispatch(node, POOL, taskId)).toBe(false);
    expect(await http1.cancelDispatch(node, POOL, randomUUID())).toBe(false);
    await expect(http1.reattach(node, POOL, randomUUID(), -1, new AttemptAbort())).rejects.toBeInstanceOf(
      DispatchGoneError,
    );
  });

  it('cancelDispatch to a node that is not there rejects with UpstreamConnectError', async () => {
    await expect(http1.cancelDispatch({ url: 'http://127.0.0.1:9' }, POOL, randomUUID())).rejects.toBeInstanceOf(
      UpstreamConnectError,
    );
  });
});
