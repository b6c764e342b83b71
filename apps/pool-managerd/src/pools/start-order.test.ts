import { afterAll, describe, expect, it } from 'vitest';
import { PoolManagerError } from '../errors.js';
import { startHarness, until, waitReady, type Harness } from '../testing/harness.js';

// Start-up order of the daemon (main.ts): engines spawn before the HTTP API is up, but a pool is
// reported ready only once the API serves. One real llama-server pool over the synthetic model.
let h: Harness | undefined;
afterAll(async () => {
  await h?.close();
});

describe('pool start order', () => {
  it('spawns and checks the engine before the daemon serves, publishes readiness only after it', async () => {
    let markServing!: () => void;
    const serving = new Promise<void>((resolve) => {
      markServing = resolve;
    });
    h = await startHarness({
      pools: [{ id: 'p', model: 'synthetic:llama', ctx: 256, threads: 1 }],
      serving,
      start: false,
    });
    const { manager } = h;
    // No engine reached yet: there is no client to hand out.
    expect(() => manager.clientFor('http://127.0.0.1:9')).toThrow(PoolManagerError);

    void manager.start();
    await manager.enginesSpawned(120_000);
    expect(h.logs.some((l) => l.msg === 'engine spawned')).toBe(true);

    await until(() => h?.logs.some((l) => l.msg === 'engine healthy'), 'engine healthy', 120_000);
    // Healthy and bound, but the daemon does not serve yet: not ready, no `pool ready`, no watcher.
    await new Promise((r) => setTimeout(r, 300));
    expect(manager.pools.snapshots()[0]).toMatchObject({ pool_id: 'p', ready: false });
    expect(manager.pools.state('p')).toBe('starting');
    expect(h.logs.some((l) => l.msg === 'pool ready')).toBe(false);
    expect(manager.watcher.state).toBe('idle');

    markServing();
    const status = await waitReady(h, 'p');
    expect(status).toMatchObject({ state: 'ready', ready: true });
    await until(() => manager.watcher.state === 'watching', 'watcher started');
    // The engine's client exists now; request handlers get the same one synchronously.
    const url = status.engine_url ?? '';
    expect(manager.clientFor(url)).toBe(await manager.engineClient(url));
  });
});
