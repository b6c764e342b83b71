import { describe, expect, it } from 'vitest';
import { closeAll, CloseTimeoutError, onceClose } from './close-all.js';

describe('closeAll', () => {
  it('runs every step in order even when earlier ones throw or hang', async () => {
    const ran: string[] = [];
    const logged: string[] = [];
    const report = await closeAll(
      [
        {
          name: 'a',
          close: () => {
            ran.push('a');
            throw new Error('a broke');
          },
        },
        undefined,
        {
          name: 'b',
          close: () =>
            new Promise(() => {
              ran.push('b');
            }),
          timeoutMs: 50,
        },
        {
          name: 'c',
          close: async () => {
            ran.push('c');
          },
        },
        { name: 'd', close: () => Promise.reject(new Error('d broke')) },
      ],
      { log: { error: (obj) => logged.push((obj as { step: string }).step) } },
    );
    expect(ran).toEqual(['a', 'b', 'c']);
    expect(report.failed.map((f) => f.name)).toEqual(['a', 'b', 'd']);
    expect(report.failed[1]?.err).toBeInstanceOf(CloseTimeoutError);
    expect(logged).toEqual(['a', 'b', 'd']);
  });

  it('reports nothing when every step closes', async () => {
    expect((await closeAll([{ name: 'a', close: () => undefined }])).failed).toEqual([]);
  });
});

describe('onceClose', () => {
  it('returns the first call’s promise to every later call', async () => {
    let calls = 0;
    const close = onceClose(async () => {
      calls += 1;
      return calls;
    });
    const first = close();
    expect(close()).toBe(first);
    expect(await first).toBe(1);
    expect(calls).toBe(1);
  });
});
