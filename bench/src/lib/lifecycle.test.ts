import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { engineListeningMs, fillPrompt } from './lifecycle-cold.js';
import { catalogLines, summarizeBlocks, type SwapBlock } from './lifecycle-swaps.js';
import { countersSince } from './on-demand.js';

let dir: string | undefined;
afterEach(async () => {
  if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  dir = undefined;
});

describe('engineListeningMs', () => {
  it("reads llama-server's M.SS.mmm.uuu stamp of its `listening on http` line", async () => {
    dir = await mkdtemp(join(tmpdir(), 'lifecycle-test-'));
    const log = join(dir, 'engine.log');
    await writeFile(
      log,
      "0.00.002.573 I srv    load_model: loading model '/m.gguf'\n" +
        '1.02.114.500 I srv  llama_server: listening on http://127.0.0.1:36171\n',
    );
    expect(await engineListeningMs(log)).toBeCloseTo(62_114.5, 3);
  });

  it('is NaN without the line or the file', async () => {
    dir = await mkdtemp(join(tmpdir(), 'lifecycle-test-'));
    await writeFile(join(dir, 'x.log'), '0.00.002.573 I srv    load_model: loading\n');
    expect(Number.isNaN(await engineListeningMs(join(dir, 'x.log')))).toBe(true);
    expect(Number.isNaN(await engineListeningMs(join(dir, 'missing.log')))).toBe(true);
  });
});

describe('fillPrompt', () => {
  it('fills a micro-batch, or as much as a slot holds', () => {
    expect(fillPrompt(2048).length).toBeGreaterThan(fillPrompt(256).length);
    expect(fillPrompt(256).length).toBeLessThan(fillPrompt(2048).length / 2);
    expect(fillPrompt(20).length).toBeGreaterThan(0);
  });
});

describe('summarizeBlocks', () => {
  const block = (over: Partial<SwapBlock>): SwapBlock => ({
    setup: 'on-demand',
    mode: 'concurrent',
    round: 1,
    wallMs: 100,
    requests: [],
    ...over,
  });

  it('counts retried refusals, failures, first-try answers and the node counters', () => {
    const s = summarizeBlocks([
      block({
        requests: [
          { model: 'a', client: 0, ms: 10, ok: true, attempts: 1, refusals: {} },
          { model: 'b', client: 1, ms: 1200, ok: true, attempts: 3, refusals: { INSUFFICIENT_MEMORY: 2 } },
          {
            model: 'c',
            client: 2,
            ms: 60_000,
            ok: false,
            attempts: 9,
            refusals: { INSUFFICIENT_MEMORY: 8 },
            error: '503 INSUFFICIENT_MEMORY',
          },
        ],
        counters: { loads: { ready: 2, refused: 1, failed: 0 }, unloads: 2 },
        catalog: { evictions: 2, evicted_busy: 1, refused: 3, room_waits: 1, started: 2, ended: { ready: 2 } },
      }),
      block({
        requests: [{ model: 'a', client: 0, ms: 20, ok: true, attempts: 1, refusals: {} }],
        counters: { loads: { ready: 1 }, unloads: 1 },
      }),
    ]);
    expect(s).toMatchObject({
      requests: 4,
      succeeded: 3,
      first_try: 2,
      refusals: { INSUFFICIENT_MEMORY: 10 },
      failures: { '503 INSUFFICIENT_MEMORY': 1 },
      ms: [10, 1200, 20],
      loads_ready: 3,
      loads_other: { refused: 1 },
      unloads: 3,
      evictions: 2,
      evicted_busy: 1,
      orch_loads_refused: 3,
      room_waits: 1,
      wall_ms: 200,
    });
  });
});

describe('countersSince', () => {
  it('subtracts per outcome, an outcome first seen after counting from 0', () => {
    expect(countersSince({ loads: { ready: 2 }, unloads: 1 }, { loads: { ready: 5, refused: 2 }, unloads: 4 })).toEqual(
      {
        loads: { ready: 3, refused: 2 },
        unloads: 3,
      },
    );
  });
});

describe('catalogLines', () => {
  it("counts an eviction of a copy whose task is placed and not ended as busy, by orchestratord's own lines", () => {
    const line = (time: number, msg: string, extra: Record<string, unknown> = {}): Record<string, unknown> => ({
      time,
      msg,
      ...extra,
    });
    const lines = [
      line(1, 'task placed', { task_id: 't1', pool_id: 'p1' }),
      line(2, 'task ended', { task_id: 't1' }),
      line(3, 'task placed', { task_id: 't2', pool_id: 'p2' }),
      line(10, 'model load refused', { model: 'c' }),
      line(11, 'model copy unloading', { pool_id: 'p1', reason: "evicted to make room for 'c'" }),
      line(12, 'model copy unloading', { pool_id: 'p2', reason: "evicted to make room for 'c'" }),
      line(13, 'model copy unloading', { pool_id: 'p3', reason: 'idle for 900 s' }),
      line(14, 'model load started', { model: 'c' }),
      line(16, 'model waits for room', { model: 'd' }),
      line(15, 'task ended', { task_id: 't2' }),
      line(20, 'model load ended', { model: 'c', ending: 'ready' }),
      line(40, 'model load refused', { model: 'd' }),
    ];
    expect(catalogLines(lines, 5, 30)).toEqual({
      evictions: 2,
      evicted_busy: 1,
      refused: 1,
      room_waits: 1,
      started: 1,
      ended: { ready: 1 },
    });
  });
});
