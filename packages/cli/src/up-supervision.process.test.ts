// Process level: `llorch up` supervises what it started, and a rolling restart loses nothing. The
// built CLI with Debian's redis-server and HAProxy, real orchestratord replicas, the real
// pool-managerd and the real llama-server (synthetic model) from the shared test cache; the load
// comes from the openai client (streamed and not) and /v2 (POST /v2/tasks + its event stream).
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { cmdline, descendants, running } from './testing/proc.js';
import { replicaId, replicasScratch, startUp, until } from './testing/up-cluster.js';

const TOKEN = 'supervision-test-token-0123456789';

const scratch = replicasScratch('up-supervision');

/** Steady load until `stop()`: each kind of client in a loop, one request at a time; every failure kept. */
/**
 * Steady load through the balancer. Each failure keeps what the cluster logged just before it,
 * less the per-task lines, so a failure on a loaded CI machine says which replica and what it saw.
 */
function load(
  base: string,
  log: () => string,
): { stop: () => Promise<{ ok: Record<string, number>; failed: string[]; context: string[] }> } {
  const openai = new OpenAI({ baseURL: `${base}/v1`, apiKey: TOKEN, maxRetries: 0, timeout: 30_000 });
  const ok: Record<string, number> = { chat: 0, stream: 0, v2: 0 };
  const failed: string[] = [];
  const context: string[] = [];
  const perTask =
    /\] (Placed|Streaming|Accepted|Task [0-9a-f-]+ finished)|\[pool-managerd\] (stream|answer|engine request)/;
  let running = true;
  const messages = [{ role: 'user' as const, content: 'Write a haiku' }];
  // The synthetic model's `</s>` (token 2) banned: unseeded sampling could end an answer early (finish_reason stop), which is no failure of the cluster's.
  const logit_bias = { '2': -100 };
  const kinds: Record<string, () => Promise<void>> = {
    chat: async () => {
      const r = await openai.chat.completions.create({ model: 'synthetic', messages, max_tokens: 16, logit_bias });
      if (r.choices[0]?.finish_reason !== 'length') throw new Error(`finish_reason ${r.choices[0]?.finish_reason}`);
    },
    stream: async () => {
      const s = await openai.chat.completions.create({
        model: 'synthetic',
        messages,
        max_tokens: 16,
        stream: true,
        logit_bias,
      });
      let finish: string | null | undefined;
      for await (const chunk of s) finish = chunk.choices[0]?.finish_reason ?? finish;
      if (finish !== 'length') throw new Error(`stream finish_reason ${finish}`);
    },
    v2: async () => {
      const headers = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };
      const res = await fetch(`${base}/v2/tasks`, {
        method: 'POST',
        headers,
        body: JSON.stringify({
          prompt: 'Write a haiku',
          model_ref: 'synthetic',
          max_tokens: 16,
          sampling: { logit_bias },
        }),
      });
      if (res.status !== 202) throw new Error(`POST /v2/tasks ${res.status}: ${await res.text()}`);
      const { streams } = (await res.json()) as { streams: { sse: string } };
      const events = await fetch(streams.sse, { headers });
      if (events.status !== 200) throw new Error(`events ${events.status}: ${await events.text()}`);
      const body = await events.text();
      const last = [...body.matchAll(/^event: (\w+)$/gm)].at(-1)?.[1];
      if (last !== 'end' || !body.includes('event: token'))
        throw new Error(`events ended with ${last}: ${body.slice(-300)}`);
    },
  };
  const loops = Object.entries(kinds).flatMap(([kind, once]) =>
    [1, 2].map(async () => {
      while (running) {
        try {
          await once();
          ok[kind]! += 1;
        } catch (err) {
          failed.push(`${kind}: ${err instanceof Error ? err.message : String(err)}`);
          const lines = log()
            .split('\n')
            .filter((l) => !perTask.test(l));
          context.push(
            `${new Date().toISOString()} ${kind} failed; the cluster's log before it:\n${lines.slice(-40).join('\n')}`,
          );
        }
      }
    }),
  );
  return {
    stop: async () => {
      running = false;
      await Promise.all(loops);
      return { ok, failed, context };
    },
  };
}

describe('llorch up supervises what it started', () => {
  it(
    'single mode: orchestratord SIGKILLed → one line naming it, pool-managerd and its engine stopped, exit 1',
    async () => {
      const up = await startUp(scratch.path, 'single', TOKEN, []);
      const tree = descendants(up.llorch.pid!);
      const orch = tree.find(
        (p) =>
          cmdline(p).includes('orchestratord') && cmdline(p).includes('main.js') && !cmdline(p).includes('setpriv'),
      );
      expect(orch, tree.map(cmdline).join('\n')).toBeDefined();
      expect(tree.map(cmdline).join('\n')).toMatch(/llama-server/);
      const t = Date.now();
      process.kill(orch!, 'SIGKILL');
      const result = await Promise.race([up.llorch, sleep(30_000).then(() => undefined)]);
      expect(result?.exitCode, up.text()).toBe(1);
      console.log(
        `llorch up (single): orchestratord SIGKILLed, everything stopped and llorch exited 1 after ${Date.now() - t} ms`,
      );
      expect(
        up.text().match(/ERROR \[orchestratord\] exited \(signal SIGKILL\); stopping the rest/g) ?? [],
        up.text(),
      ).toHaveLength(1);
      expect(up.text()).toMatch(
        /^llorch: orchestratord exited \(signal SIGKILL; see its log above\); llama-orch is stopped$/m,
      );
      expect(up.text()).toMatch(/\[pool-managerd\] stopped/);
      const left = tree.filter(running);
      for (const p of left) process.kill(p, 'SIGKILL');
      expect(left.map((p) => `${p}: ${cmdline(p)}`)).toEqual([]);
    },
    4 * 60_000,
  );

  it(
    'single mode: pool-managerd SIGKILLed → one line naming it, orchestratord stopped, its engine gone, exit 1',
    async () => {
      const up = await startUp(scratch.path, 'single-pool', TOKEN, []);
      const tree = descendants(up.llorch.pid!);
      const pool = tree.find(
        (p) =>
          cmdline(p).includes('pool-managerd') && cmdline(p).includes('main.js') && !cmdline(p).includes('setpriv'),
      );
      expect(pool, tree.map(cmdline).join('\n')).toBeDefined();
      process.kill(pool!, 'SIGKILL');
      const result = await Promise.race([up.llorch, sleep(30_000).then(() => undefined)]);
      expect(result?.exitCode, up.text()).toBe(1);
      expect(
        up.text().match(/ERROR \[pool-managerd\] exited \(signal SIGKILL\); stopping the rest/g) ?? [],
        up.text(),
      ).toHaveLength(1);
      expect(up.text()).toMatch(/\[orchestratord\] stopped/);
      const exitedAt = Date.now();
      // the engine goes with its parent-death signal
      while (Date.now() - exitedAt < 5000 && tree.some(running)) await sleep(100);
      const left = tree.filter(running);
      for (const p of left) process.kill(p, 'SIGKILL');
      expect(left.map((p) => `${p}: ${cmdline(p)}`)).toEqual([]);
    },
    4 * 60_000,
  );

  it(
    '--replicas 3: a rolling restart (SIGTERM to each replica in turn, restarted on its port) under openai and /v2 load fails no request',
    async () => {
      const up = await startUp(scratch.path, 'rolling', TOKEN, [
        '--replicas',
        '3',
        '--state-dir',
        join(scratch.path, 'rolling-state'),
      ]);
      const warm = load(up.base, up.text);
      await sleep(1000);
      const t0 = Date.now();
      const figures: string[] = [];
      for (const id of ['r1', 'r2', 'r3']) {
        const pid = descendants(up.llorch.pid!).find(
          (p) => replicaId(p) === id && cmdline(p).includes('orchestratord'),
        );
        expect(pid, id).toBeDefined();
        const tTerm = Date.now();
        process.kill(pid!, 'SIGTERM');
        await until(
          `${id} was not restarted`,
          () => new RegExp(`\\[orchestratord ${id}\\] restarted: ready \\d+ ms after it exited`).test(up.text()),
          45_000,
          up.text,
        );
        // back in the balancer before the next one goes (HAProxy: rise 2)
        const ups = (): number => (up.text().match(new RegExp(`Server orchestratord/${id} is UP`, 'g')) ?? []).length;
        await until(`HAProxy did not take ${id} back`, () => ups() >= 1, 10_000, up.text);
        const drained = new RegExp(`\\[orchestratord ${id}\\] drained in (\\d+) ms`).exec(up.text())?.[1];
        const restarted = new RegExp(`\\[orchestratord ${id}\\] restarted: ready (\\d+) ms`).exec(up.text())?.[1];
        figures.push(
          `${id}: drained in ${drained} ms, ready again ${restarted} ms after its exit, back in the balancer ${Date.now() - tTerm} ms after SIGTERM`,
        );
      }
      const { ok, failed, context } = await warm.stop();
      console.log(
        `rolling restart of 3 replicas in ${Date.now() - t0} ms; requests ok ${JSON.stringify(ok)}, failed ${failed.length}\n  ${figures.join('\n  ')}`,
      );
      expect(failed, context.join('\n\n')).toEqual([]);
      for (const kind of ['chat', 'stream', 'v2']) expect(ok[kind], kind).toBeGreaterThan(3);
      // each replica drained (its tasks ended within the grace), none past the grace
      expect(
        figures.filter((f) => f.includes('drained in undefined')),
        up.text(),
      ).toEqual([]);
      // each exit reported once, none seen as a failure
      for (const id of ['r1', 'r2', 'r3'])
        expect(
          up.text().match(new RegExp(`WARN \\[orchestratord ${id}\\] exited \\(code 0\\); restarting`, 'g')) ?? [],
          id,
        ).toHaveLength(1);
      expect(up.text()).not.toMatch(/drain grace over/);
      up.llorch.kill('SIGTERM');
      const result = await Promise.race([up.llorch, sleep(60_000).then(() => undefined)]);
      expect(result?.exitCode, up.text()).toBe(0);
    },
    5 * 60_000,
  );
});
