import { describe, expect, it } from 'vitest';
import type { SharedStore } from './cluster-store.js';
import type { SessionPoolRef } from './session-affinity-store.js';
import { STORE_KINDS, sleep, storeHarness } from '../testing/store-harness.js';
import { admission, admissionView } from '../testing/store-steps.js';

// A session's turns start with their task's admission and end with its finish (the lifecycle
// steps); the session routes read and delete it (`get`, `delete`); an admission reads its pool and
// budget left (`admissionView`).
describe.each(STORE_KINDS)('sessions and affinity (%s store)', (kind) => {
  const h = storeHarness(kind);
  let turns = 0;

  /** A turn of `session` starts on `store`: a task admitted for it. Returns its task id. */
  async function started(store: SharedStore, session: string): Promise<string> {
    const id = `turn-${(turns += 1)}`;
    expect(await store.lifecycle.admit(admission(id, 'A', { session, group: id }))).toMatchObject({ kind: 'queued' });
    return id;
  }

  /** The turn of task `id` ends on `store` (tokens undefined: it ended with an error). */
  async function ended(
    store: SharedStore,
    id: string,
    session: string,
    tokensOut: number | undefined,
    pool?: SessionPoolRef,
  ): Promise<void> {
    await store.lifecycle.finish({
      id,
      fence: 1,
      outcome: '{}',
      retainMs: 1000,
      dequeue: true,
      session: { id: session, tokensOut, pool },
    });
  }

  it('a conversation keeps its pool whichever replica takes each turn; turns, tokens and budget count once', async () => {
    const [a, b, c] = await h.open(3, { session_token_budget: 100 });
    expect(await admissionView(a!, 's1')).toMatchObject({ lastPool: undefined, budgetRemaining: 100 });
    const first = await started(a!, 's1');
    expect(await c!.sessions.get('s1')).toMatchObject({
      session_id: 's1',
      turns: 0,
      tokens_out: 0,
      active_tasks: 1,
      tokens_budget_remaining: 100,
    });
    await ended(b!, first, 's1', 30, { node_id: 'n1', pool_id: 'p1' });
    expect((await admissionView(c!, 's1')).lastPool).toEqual({ node_id: 'n1', pool_id: 'p1' });
    const second = await started(c!, 's1');
    await ended(a!, second, 's1', undefined); // ended with an error: no turn, affinity kept
    expect(await b!.sessions.get('s1')).toMatchObject({
      turns: 1,
      tokens_out: 30,
      active_tasks: 0,
      tokens_budget_remaining: 70,
    });
    expect(await admissionView(b!, 's1')).toMatchObject({
      lastPool: { node_id: 'n1', pool_id: 'p1' },
      budgetRemaining: 70,
    });
    // a session deleted while its task ran is not brought back by the end
    const third = await started(a!, 's2');
    expect(await b!.sessions.delete('s2')).toBe(true);
    expect(await b!.sessions.delete('s2')).toBe(false);
    await ended(c!, third, 's2', 5);
    expect(await a!.sessions.get('s2')).toBeUndefined();
  });

  it('expires ttl after the last activity, never while a task of it is active', async () => {
    const [a, b] = await h.open(2, { session_ttl_ms: 1000 });
    await ended(a!, await started(a!, 'idle'), 'idle', 1, { node_id: 'n', pool_id: 'p' });
    const busy = await started(a!, 'busy');
    const fresh = await b!.sessions.get('idle');
    expect(fresh!.ttl_ms_remaining).toBeGreaterThan(800);
    expect(fresh!.ttl_ms_remaining).toBeLessThanOrEqual(1000);
    await sleep(1100);
    expect(await b!.sessions.get('idle')).toBeUndefined();
    expect((await admissionView(b!, 'idle')).lastPool).toBeUndefined();
    expect(await b!.sessions.get('busy')).toMatchObject({ active_tasks: 1, ttl_ms_remaining: 1000 });
    await ended(b!, busy, 'busy', 2);
    expect(await a!.sessions.get('busy')).toMatchObject({ active_tasks: 0, turns: 1 });
  });
});
