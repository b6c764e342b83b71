// Process level: a replica that stalls (SIGSTOP, as a loaded machine or a long GC pause can) for
// longer than its 2 s owner lease while a /v2 task it admitted waits in the cluster's queue.
// Another replica finds the lease lapsed and takes the queued task over (it dispatches it in its
// queue order). When the stalled replica runs again, the store refuses it the task (let go, fenced,
// or its entry gone); its client must follow the task to its new owner (Last-Event-ID) and get
// every token once and the end — not `error STORE_UNAVAILABLE` (or INTERNAL) for a task that
// completes elsewhere (spec 65, Orphans). The stalled replica is the built daemon (dist/main.js);
// the other runs in this process, both on a real redis-server, with a FIXTURE node.
import { execFileSync, spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import {
  ANN,
  annAuth,
  fixtureCluster,
  KEYS,
  NODE,
  replicaHarness,
  until,
  type Replica,
} from '../testing/replica-harness.js';
import { openSse, taskBody, type SseFrameRecord } from '../testing/test-helpers.js';

const APP_DIR = dirname(dirname(dirname(fileURLToPath(import.meta.url))));
const MAIN = join(APP_DIR, 'dist', 'main.js');
const PREFIX = 'stall-queued:';

let dir: string;
beforeAll(async () => {
  execFileSync('npx', ['tsc', '--build', APP_DIR], { cwd: APP_DIR, stdio: 'inherit' });
  dir = await mkdtemp(join(tmpdir(), 'orchd-stall-'));
  await writeFile(join(dir, 'keys.yaml'), KEYS);
}, 120_000);
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** The built daemon as replica `id` of the cluster, once it listens: its pid, URL and output so far. */
async function daemonReplica(redisUrl: string, id: string): Promise<{ pid: number; url: string; text: () => string }> {
  const child = spawn(process.execPath, [MAIN], {
    env: {
      ...{
        PATH: process.env.PATH ?? '',
        ORCHD_ADDR: '127.0.0.1:0',
        ORCHD_KEYS_FILE: join(dir, 'keys.yaml'),
        LLORCH_NODE_TOKEN: NODE,
      },
      ...{
        ORCHD_REDIS_URL: redisUrl,
        ORCHD_REDIS_PREFIX: PREFIX,
        ORCHD_REPLICA_ID: id,
        ORCHD_NODE_HEARTBEAT_MS: '200',
      },
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  onTestFinished(() => {
    // a test that failed while it was stopped: it must not outlive the test
    child.kill('SIGCONT');
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  let text = '';
  child.stdout.on('data', (c: Buffer) => (text += c.toString('utf8')));
  await until(() => text.includes('"msg":"listening"') || child.exitCode !== null, `replica ${id} to listen`, 20_000);
  const url = /"msg":"listening","url":"([^"]+)"|"url":"([^"]+)"[^\n]*"msg":"listening"/.exec(text);
  const found = url?.[1] ?? url?.[2];
  if (found === undefined || child.pid === undefined) throw new Error(`replica ${id} did not start:\n${text}`);
  return { pid: child.pid, url: found, text: () => text };
}

interface Reading {
  readonly frames: SseFrameRecord[];
  reconnects: number;
  done: boolean;
}

/**
 * A /v2 task's events as an EventSource reads them: from `base`, reconnecting there with
 * Last-Event-ID (after 100 ms) whenever the stream ends without a terminal frame, until one.
 * `r` shows the frames and reconnects as they come.
 */
async function readTask(base: string, id: string, r: Reading): Promise<Reading> {
  for (; r.reconnects < 50; r.reconnects += 1) {
    const last = r.frames.at(-1)?.id;
    const sse = await openSse(`${base}/v2/tasks/${id}/events`, {
      ...annAuth,
      ...(last !== undefined ? { 'last-event-id': String(last) } : {}),
    });
    const before = r.frames.length;
    const copy = setInterval(() => r.frames.push(...sse.frames.slice(r.frames.length - before)), 20);
    await sse.done;
    clearInterval(copy);
    r.frames.push(...sse.frames.slice(r.frames.length - before));
    const end = r.frames.at(-1);
    if (end?.event === 'end' || end?.event === 'error') {
      r.done = true;
      return r;
    }
    await new Promise((ok) => setTimeout(ok, 100));
  }
  throw new Error(`no terminal frame after 50 reconnects: ${JSON.stringify(r.frames.map((f) => f.event))}`);
}

describe('a replica stalled past its owner lease with a queued /v2 task', () => {
  const h = replicaHarness();

  it(
    'hands the task off to the replica that took it over: its client follows it there and gets every token once and the end; a /v1 client (no resume) gets a typed 503',
    { timeout: 60_000 },
    async () => {
      const { replicas, node } = await fixtureCluster(h, PREFIX, 1, { tokenIntervalMs: 10 });
      const b = replicas[0] as Replica;
      const a = await daemonReplica(h.server().url, 'stalls');
      const online = async () => {
        const res = await fetch(`${a.url}/v2/pools`, { headers: annAuth });
        const body = (await res.json()) as { pools?: Array<{ node_state: string }> };
        return body.pools?.[0]?.node_state === 'online';
      };
      await until(online, 'the stalling replica to see the node online', 10_000);
      // the pool's one slot is busy (40 s) with a task of b's: a's task waits in the cluster's queue
      const long = taskBody({ max_tokens: 4000 });
      expect(
        (await b.app.inject({ method: 'POST', url: '/v2/tasks', headers: annAuth, payload: long })).statusCode,
      ).toBe(202);
      await until(() => node.active('p') === 1, 'the long task to run');
      const queued = taskBody({ max_tokens: 50 });
      const id = String(queued.task_id);
      const admitted = await fetch(`${a.url}/v2/tasks`, {
        method: 'POST',
        headers: { ...annAuth, 'content-type': 'application/json' },
        body: JSON.stringify(queued),
      });
      expect(admitted.status, await admitted.clone().text()).toBe(202);
      expect(await b.store.tasks.get(id)).toMatchObject({ owner: 'stalls', state: 'queued' });
      // a /v1 request queued behind it on a: its client's connection is to a, it cannot follow the task
      const openai = new OpenAI({ baseURL: `${a.url}/v1`, apiKey: ANN, maxRetries: 0 });
      const v1 = openai.chat.completions
        .create({ model: 'm', messages: [{ role: 'user', content: 'hi' }], max_tokens: 5 })
        .then(
          () => undefined,
          (err: unknown) => err,
        );
      await until(async () => (await b.store.queue.sizes()).interactive === 2, 'both to be queued in the cluster');
      const progress: Reading = { frames: [], reconnects: 0, done: false };
      const reading = readTask(a.url, id, progress);
      await until(() => progress.frames.length > 0, 'the first frame of the task');
      process.kill(a.pid, 'SIGSTOP');
      const stoppedAt = Date.now();
      try {
        // its lease (2 s) lapses; b's sweep (every 100 ms) takes the task over, still queued behind the long one
        await until(
          () => b.logs.records().some((l) => l.msg === 'orphaned task adopted' && l.task_id === id),
          'b to take the queued task over',
          10_000,
        );
      } finally {
        process.kill(a.pid, 'SIGCONT');
      }
      const stalledMs = Date.now() - stoppedAt;
      // a finds the task is b's: its client's stream ends without a terminal frame and reconnects (not error STORE_UNAVAILABLE)
      await until(
        () => progress.reconnects > 0 || progress.done,
        "the client to reconnect or get the task's end",
        5000,
      );
      // the slot frees: b dispatches the task it took over
      expect(
        (await b.app.inject({ method: 'POST', url: `/v2/tasks/${String(long.task_id)}/cancel`, headers: annAuth }))
          .statusCode,
      ).toBe(204);
      const relevant = () =>
        a
          .text()
          .split('\n')
          .filter((l) => l.includes(id) || /"level":(40|50)/.test(l))
          .join('\n');
      const { frames, reconnects } = await reading;
      const tokens = frames.filter((f) => f.event === 'token');
      const end = frames.at(-1);
      expect(end, `${JSON.stringify(end)}\n${relevant()}`).toMatchObject({
        event: 'end',
        data: { finish_reason: 'length' },
      });
      expect(tokens.map((f) => f.data.i)).toEqual(Array.from({ length: 50 }, (_, i) => i));
      expect(new Set(frames.map((f) => f.id)).size).toBe(frames.length);
      expect(frames.map((f) => f.id)).toEqual([...frames.map((f) => f.id)].sort((x, y) => x - y));
      expect(reconnects).toBeGreaterThan(0);
      // a let it go to b instead of ending it; b dispatched it once and wrote its end
      expect(a.text()).toMatch(
        new RegExp(`"task_id":"${id}"[^\\n]*"msg":"task handed off"|"msg":"task handed off"[^\\n]*"task_id":"${id}"`),
      );
      expect(node.dispatches.filter((d) => d.body.task_id === id)).toHaveLength(1);
      // today's behaviour for /v1 (spec 65): a typed, retriable 503 in OpenAI's shape, with Retry-After
      const refused = await v1;
      expect(refused).toBeInstanceOf(OpenAI.APIError);
      expect((refused as InstanceType<typeof OpenAI.APIError>).status).toBe(503);
      expect((refused as InstanceType<typeof OpenAI.APIError>).code).toBe('STORE_UNAVAILABLE');
      expect((refused as InstanceType<typeof OpenAI.APIError>).headers?.get('retry-after')).toMatch(/^\d+$/);
      const stored = await b.store.tasks.get(id);
      expect(stored).toMatchObject({ state: 'ended', owner: b.app.services.replicas.identity.replicaId });
      expect(JSON.parse(stored!.outcome!)).toMatchObject({ event: 'end' });
      console.log(
        `replica stalled ${stalledMs} ms (SIGSTOP) with a queued /v2 task: taken over, handed off, ${tokens.length} tokens and the end after ${reconnects} reconnect(s)`,
      );
    },
  );
});
