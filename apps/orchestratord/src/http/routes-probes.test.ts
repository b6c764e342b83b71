import { LivenessSchema, ReadinessSchema } from '@llama-orch/contracts';
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { makeApp, type TestApp } from '../testing/test-helpers.js';

describe('probes: /healthz and /readyz', () => {
  let t: TestApp | undefined;
  afterEach(async () => t?.close());

  it('answer without a token; not ready until listening', async () => {
    t = await makeApp();
    const live = await t.app.inject({ method: 'GET', url: '/healthz' });
    expect(live.statusCode).toBe(200);
    expect(LivenessSchema.parse(live.json())).toEqual({ status: 'ok' });
    expect(live.headers['x-correlation-id']).toBeDefined();
    expect(live.headers['cache-control']).toBe('no-store');
    // inject does not listen: the app cannot take a client's connection yet
    const ready = await t.app.inject({ method: 'GET', url: '/readyz?probe=1' });
    expect(ready.statusCode).toBe(503);
    expect(ReadinessSchema.parse(ready.json())).toEqual({ status: 'not_ready', reason: 'not listening' });
    expect(ready.headers['retry-after']).toBe('1');
    // the rest still needs the token
    expect((await t.app.inject({ method: 'GET', url: '/v2/nodes' })).statusCode).toBe(401);
  });

  it('over a real socket: ready while listening, not ready from the first moment of the close', async () => {
    t = await makeApp();
    const app = t.app;
    let release!: () => void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    let closeStarted!: () => void;
    const started = new Promise<void>((r) => {
      closeStarted = r;
    });
    // runs after the app's own preClose hook: the listener is still open, the close has begun
    app.addHook('preClose', async () => {
      closeStarted();
      await gate;
    });
    await app.listen({ host: '127.0.0.1', port: 0 });
    const url = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
    const res = await request(`${url}/readyz`);
    expect(res.statusCode).toBe(200);
    expect(ReadinessSchema.parse(await res.body.json())).toEqual({ status: 'ready' });
    const live = await request(`${url}/healthz`);
    expect(live.statusCode).toBe(200);
    await live.body.dump();

    const closing = app.close();
    await started;
    const during = await request(`${url}/readyz`);
    expect(during.statusCode).toBe(503);
    expect(await during.body.json()).toEqual({ status: 'not_ready', reason: 'shutting down' });
    release();
    await closing;
  });
});
