import { describe, expect, it } from 'vitest';
import { request } from 'undici';
import { FixturePoolManager } from './fixture-pool-manager.js';

const TASK = '0b7e3f9c-3c1a-4f7e-9c55-1f5b2b8d2a10';

async function dispatch(f: FixturePoolManager, poolId: string, maxTokens: number) {
  const res = await request(`${f.url}/v2/pools/${poolId}/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ task_id: TASK, prompt: 'two words', max_tokens: maxTokens }),
  });
  const text = await res.body.text();
  return {
    status: res.statusCode,
    lines: text
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>),
  };
}

describe('FIXTURE pool-managerd', () => {
  it('streams words, ends with the last token, and records the dispatch', async () => {
    const f = await FixturePoolManager.start({
      nodeId: 'n1',
      pools: [{ pool_id: 'p1', models: ['m'], slots: 1 }],
      tokenIntervalMs: 5,
    });
    try {
      const started = Date.now();
      const { status, lines } = await dispatch(f, 'p1', 2);
      expect(status).toBe(200);
      expect(lines).toMatchObject([
        { type: 'token', t: 'tok0 ', i: 0 },
        { type: 'token', t: 'tok1 ', i: 1 },
        { type: 'end', tokens_out: 2, stop_type: 'limit', prompt_tokens: 2, pool_id: 'p1', node_id: 'n1' },
      ]);
      // first token after one interval, the end with the second: two intervals, not three
      expect(Date.now() - started).toBeGreaterThanOrEqual(9);
      expect(f.dispatches.map((d) => d.body.task_id)).toEqual([TASK]);
      expect(f.completed).toEqual([TASK]);
    } finally {
      await f.close();
    }
  });

  it('a busy pool reports no free slot and refuses; record: false keeps no history', async () => {
    const f = await FixturePoolManager.start({
      nodeId: 'n1',
      pools: [
        { pool_id: 'busy', models: ['m'], slots: 2, busy: true },
        { pool_id: 'free', models: ['m'], slots: 2 },
      ],
      tokenIntervalMs: 5,
      tokens: 'clock',
      record: false,
    });
    try {
      expect(f.snapshots().map((p) => [p.pool_id, p.ready, p.slots_free])).toEqual([
        ['busy', true, 0],
        ['free', true, 2],
      ]);
      const refused = await dispatch(f, 'busy', 1);
      expect(refused.status).toBe(503);
      expect(refused.lines[0]).toMatchObject({ code: 'REPLICA_EXHAUSTED' });
      const served = await dispatch(f, 'free', 1);
      expect(served.lines.map((l) => l.type)).toEqual(['token', 'end']);
      expect(typeof BigInt(served.lines[0]?.t as string)).toBe('bigint');
      expect([f.dispatches, f.completed, f.refusedSaturated, f.aborts]).toEqual([[], [], [], []]);
    } finally {
      await f.close();
    }
  });
});
