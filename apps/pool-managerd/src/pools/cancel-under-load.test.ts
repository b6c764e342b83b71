import { readFileSync, statSync } from 'node:fs';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DispatchEvent } from '@llama-orch/contracts';
import { dispatch, poolStatus, report, startHarness, until, waitReady, type Harness } from '../testing/harness.js';

// A non-streamed generation cancelled by its client while another slot of the same engine streams
// (issue 28's cancel gap), through an in-process pool-managerd to one real llama-server pool with 2
// slots (synthetic model, 4096 tokens of context per slot so both generations run for seconds).
//
// llama-server ends a non-streamed request whose client left only when its HTTP thread checks the
// connection, which the llama.cpp we ship does after a whole second in which no result of ANY task
// reached the shared result queue: tokens streamed from the other slot are such results, so without
// llama-orch's patch (packages/llamacpp-source/patches/0001-…) the cancelled generation runs on
// while the other one streams. How the engine ended the task is read from its own log (the file
// the `engine spawned` line names); nothing polls /slots or /metrics, which would add results too.
let h: Harness;
let logPath: string;

const MAX_TOKENS = 3800;
const PATCH = '0001-server-queue-stop-check-deadline.patch';

beforeAll(async () => {
  h = await startHarness({
    pools: [{ id: 'cx', model: 'synthetic:llama?ctx=8192', ctx: 8192, slots: 2, threads: 1 }],
    supervision: { stopTimeoutMs: 3000 },
  });
  await waitReady(h, 'cx');
  logPath = h.logs.find((l) => l.msg === 'engine spawned' && l.pool_id === 'cx')?.log as string;
}, 45 * 60_000);

afterAll(async () => {
  await h?.close();
});

/** A greedy completion that runs to max_tokens unless cancelled (logit_bias bans the end-of-text token, id 2). */
function longRun(prompt: string, stream: boolean): Record<string, unknown> {
  return {
    workload: 'completion',
    prompt,
    max_tokens: MAX_TOKENS,
    greedy: true,
    stream,
    sampling: { logit_bias: { 2: -100 } },
  };
}

/** Engine task ids in the order the engine's slots took them, from its log after `offset`. */
function tasksStarted(offset: number): number[] {
  return [
    ...readFileSync(logPath, 'utf8')
      .slice(offset)
      .matchAll(/\| task (\d+) \| processing task/g),
  ].map((m) => Number(m[1]));
}

describe('a cancelled non-streamed generation on a busy engine', () => {
  it('runs on an engine built with the carried patch, which the pool status and its ready line name', async () => {
    expect((await poolStatus(h, 'cx')).engine_patches).toContain(PATCH);
    expect(h.logs.find((l) => l.msg === 'pool ready' && l.pool_id === 'cx')?.engine_patches).toContain(PATCH);
  });

  it('is cancelled by the engine within ~2 s while another slot streams, and its slot released well before max_tokens', async () => {
    const offset = statSync(logPath).size;

    // Slot 1: a long streamed generation, read to its end in the background.
    const streamed = await dispatch(h, 'cx', longRun('Tell a long story about the sea', true));
    expect(streamed.status).toBe(200);
    let streamedTokens = 0;
    let streamedEnded = false;
    const streamedDone = (async () => {
      for await (const e of streamed.events as AsyncIterable<DispatchEvent>) if (e.type === 'token') streamedTokens++;
      streamedEnded = true;
    })();
    streamedDone.catch(() => undefined);
    await until(() => streamedTokens > 0, 'first streamed token', 30_000, 5);

    // Slot 2: a long non-streamed generation whose client leaves once the engine runs it.
    const ac = new AbortController();
    const answer = await request(`${h.url}/v2/pools/cx/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${h.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ task_id: crypto.randomUUID(), ...longRun('Hold the other slot', false) }),
      signal: ac.signal,
    });
    expect(answer.statusCode).toBe(200);
    answer.body.on('error', () => undefined);
    const [streamedTask, answerTask] = await until(
      () => (tasksStarted(offset).length >= 2 ? tasksStarted(offset) : undefined),
      'both engine tasks running',
      30_000,
      5,
    );
    const tokensAtAbort = streamedTokens;
    const abortedAt = Date.now();
    ac.abort();

    const cancel = new RegExp(`cancel task, id_task = ${String(answerTask)}\\b`);
    const release = new RegExp(`\\| task ${String(answerTask)} \\| stop processing: n_tokens = (\\d+)`);
    const released = await until(
      () => release.exec(readFileSync(logPath, 'utf8').slice(offset)),
      'the non-streamed slot released in the engine log',
      60_000,
      20,
    );
    const releaseMs = Date.now() - abortedAt;
    const engineLines = readFileSync(logPath, 'utf8').slice(offset);
    const streamedMeanwhile = streamedTokens - tokensAtAbort;
    report(
      `cancel under load: non-streamed slot released ${releaseMs} ms after the client left, n_tokens ${String(released[1])}; the other slot streamed ${streamedMeanwhile} tokens meanwhile`,
    );

    expect(engineLines, 'the engine cancelled the non-streamed task').toMatch(cancel);
    expect(streamedEnded, 'the streamed generation was still running when the other slot was released').toBe(false);
    expect(streamedMeanwhile, 'tokens kept streaming on the other slot meanwhile').toBeGreaterThan(0);
    expect(releaseMs, engineLines.slice(-2000)).toBeLessThan(2500);
    expect(Number(released[1])).toBeLessThan(MAX_TOKENS / 2);
    expect(streamedTask).not.toBe(answerTask);

    await until(
      () => h.logs.some((l) => l.msg === 'dispatch ended' && l.outcome === 'canceled' && l.stream === false),
      'dispatch canceled logged',
      5000,
    );
    // One lease left: the streamed one. Then it goes too.
    await until(async () => (await poolStatus(h, 'cx')).active_leases === 1, 'the non-streamed lease released', 5000);
    streamed.destroy();
    await streamedDone.catch(() => undefined);
    await until(async () => (await poolStatus(h, 'cx')).slots_free === 2, 'both leases released', 10_000);
  }, 120_000);
});
