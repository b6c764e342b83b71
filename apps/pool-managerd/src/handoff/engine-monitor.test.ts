import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import type { LlamaServerClient } from '@llama-orch/llamacpp-adapter';
import { EngineMonitor } from './engine-monitor.js';

describe('EngineMonitor', () => {
  it('close() aborts a probe in flight; no callback runs after it; a second close is a no-op', async () => {
    let probeSignal: AbortSignal | undefined;
    let probes = 0;
    // A health probe that never answers on its own (an engine that hangs).
    const client = {
      health: (signal?: AbortSignal) => {
        probes += 1;
        probeSignal = signal;
        return new Promise((_, reject) =>
          signal?.addEventListener('abort', () => reject(signal.reason), { once: true }),
        );
      },
    } as unknown as LlamaServerClient;
    const calls: string[] = [];
    const monitor = new EngineMonitor({
      client,
      logger: pino({ level: 'silent' }),
      intervalMs: 5,
      failuresToDown: 1,
      onDown: () => calls.push('down'),
      onUp: () => calls.push('up'),
    });
    while (probeSignal === undefined) await new Promise((r) => setTimeout(r, 5));
    monitor.close();
    monitor.close();
    expect(probeSignal.aborted).toBe(true);
    await new Promise((r) => setTimeout(r, 50));
    expect(monitor.state).toBe('closed');
    expect(calls).toEqual([]);
    expect(probes).toBe(1);
  });
});
