import { describe, expect, it } from 'vitest';
import { STORE_KINDS, sleep, storeHarness } from '../testing/store-harness.js';

describe.each(STORE_KINDS)('sessions and affinity (%s store)', (kind) => {
  const h = storeHarness(kind);

  it('a conversation keeps its pool whichever replica takes each turn; turns, tokens and budget count once', async () => {
    const [a, b, c] = await h.open(3, { session_token_budget: 100 });
    expect(await a!.sessions.lastPool('s1')).toBeUndefined();
    expect(await a!.sessions.budgetRemaining('s1')).toBe(100);
    await a!.sessions.taskStarted('s1');
    expect(await c!.sessions.get('s1')).toMatchObject({ session_id: 's1', turns: 0, tokens_out: 0, active_tasks: 1, tokens_budget_remaining: 100 });
    await b!.sessions.taskEnded('s1', 30, { node_id: 'n1', pool_id: 'p1' });
    expect(await c!.sessions.lastPool('s1')).toEqual({ node_id: 'n1', pool_id: 'p1' });
    await c!.sessions.taskStarted('s1');
    await a!.sessions.taskEnded('s1', undefined); // ended with an error: no turn, affinity kept
    expect(await b!.sessions.get('s1')).toMatchObject({ turns: 1, tokens_out: 30, active_tasks: 0, tokens_budget_remaining: 70 });
    expect(await b!.sessions.lastPool('s1')).toEqual({ node_id: 'n1', pool_id: 'p1' });
    expect(await a!.sessions.budgetRemaining('s1')).toBe(70);
    // a session deleted while its task ran is not brought back by the end
    await a!.sessions.taskStarted('s2');
    expect(await b!.sessions.delete('s2')).toBe(true);
    expect(await b!.sessions.delete('s2')).toBe(false);
    await c!.sessions.taskEnded('s2', 5);
    expect(await a!.sessions.get('s2')).toBeUndefined();
  });

  it('expires ttl after the last activity, never while a task of it is active', async () => {
    const [a, b] = await h.open(2, { session_ttl_ms: 1000 });
    await a!.sessions.taskStarted('idle');
    await a!.sessions.taskEnded('idle', 1, { node_id: 'n', pool_id: 'p' });
    await a!.sessions.taskStarted('busy');
    const fresh = await b!.sessions.get('idle');
    expect(fresh!.ttl_ms_remaining).toBeGreaterThan(800);
    expect(fresh!.ttl_ms_remaining).toBeLessThanOrEqual(1000);
    await sleep(1100);
    expect(await b!.sessions.get('idle')).toBeUndefined();
    expect(await b!.sessions.lastPool('idle')).toBeUndefined();
    expect(await b!.sessions.get('busy')).toMatchObject({ active_tasks: 1, ttl_ms_remaining: 1000 });
    await b!.sessions.taskEnded('busy', 2);
    expect(await a!.sessions.get('busy')).toMatchObject({ active_tasks: 0, turns: 1 });
  });
});
