import { pino } from 'pino';
import { describe, expect, it, vi } from 'vitest';
import { startTracing } from './start-tracing.js';

// "Off costs nothing": the SDK module (and through it every @opentelemetry package but the API) is
// imported only when tracing is on. Here it is a stand-in that counts its imports.
const sdk = vi.hoisted(() => ({ imports: 0 }));
vi.mock('./sdk.js', () => {
  sdk.imports += 1;
  return { startSdk: () => ({ enabled: true, tracer: undefined, close: () => Promise.resolve() }) };
});

const logger = pino({ level: 'silent' });

describe('startTracing with tracing off', () => {
  it.each([
    ['nothing set', {}],
    ['OTEL_SDK_DISABLED=true', { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318', OTEL_SDK_DISABLED: 'true' }],
    [
      'OTEL_TRACES_EXPORTER=none',
      { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318', OTEL_TRACES_EXPORTER: 'none' },
    ],
  ])('%s: never imports the SDK', async (_, env) => {
    const tracing = await startTracing({ serviceName: 'x', env, logger });
    expect(tracing.enabled).toBe(false);
    await tracing.close();
    expect(sdk.imports).toBe(0);
  });

  it('(the stand-in is what a start with an endpoint imports)', async () => {
    const tracing = await startTracing({
      serviceName: 'x',
      env: { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318' },
      logger,
    });
    expect(tracing.enabled).toBe(true);
    expect(sdk.imports).toBe(1);
  });
});
