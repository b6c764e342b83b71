import { request } from 'undici';
import { describe, expect, it } from 'vitest';
import { loadConfig } from './config.js';
import { startServer } from './server.js';
import { captureLogger } from './testing/test-helpers.js';

describe('startServer', () => {
  it('listens on port 0, logs {"msg":"listening","url"} with the actual port, and closes idempotently', async () => {
    const { logger, records } = captureLogger('info');
    const server = await startServer({ config: loadConfig({ env: { ORCHD_ADDR: '127.0.0.1:0' } }), logger });
    try {
      const line = records().find((r) => r.msg === 'listening');
      expect(line?.url).toBe(server.url);
      expect(server.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      expect(server.url.endsWith(':0')).toBe(false);
      const res = await request(`${server.url}/v2/meta/capabilities`);
      expect(res.statusCode).toBe(200);
      await res.body.dump();
    } finally {
      await Promise.all([server.close(), server.close()]);
    }
    await expect(request(`${server.url}/metrics`)).rejects.toThrow();
  });

  it('stop(): not ready at once, still serving for the drain delay with nothing to finish, then closed; idempotent', async () => {
    const { logger, records } = captureLogger('info');
    const server = await startServer({
      config: loadConfig({ env: { ORCHD_ADDR: '127.0.0.1:0', ORCHD_DRAIN_DELAY_MS: '400' } }),
      logger,
    });
    const t0 = performance.now();
    const stopping = Promise.all([server.stop(), server.stop()]);
    const ready = await request(`${server.url}/readyz`);
    expect(ready.statusCode).toBe(503);
    expect(await ready.body.json()).toMatchObject({ status: 'not_ready', reason: 'shutting down' });
    const caps = await request(`${server.url}/v2/meta/capabilities`);
    expect(caps.statusCode).toBe(200);
    await caps.body.dump();
    const [a, b] = await stopping;
    expect(a).toBe(b);
    expect(a.failed).toEqual([]);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(390);
    expect(records().find((r) => r.msg === 'drained')).toMatchObject({ ms: expect.any(Number) });
    await expect(request(`${server.url}/metrics`)).rejects.toThrow();
  });

  it('fails to start when the port is taken', async () => {
    const { logger } = captureLogger('info');
    const first = await startServer({ config: loadConfig({ env: { ORCHD_ADDR: '127.0.0.1:0' } }), logger });
    try {
      const port = new URL(first.url).port;
      await expect(
        startServer({ config: loadConfig({ env: { ORCHD_ADDR: `127.0.0.1:${port}` } }), logger }),
      ).rejects.toThrow(/EADDRINUSE/);
    } finally {
      await first.close();
    }
  });
});
