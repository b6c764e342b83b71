import { describe, expect, it } from 'vitest';
import { sampleSnapshot } from '../testing/sample-snapshot.js';
import { modelChoices } from './models.js';

describe('models', () => {
  it('offers aliases first, serving pools before the others, each name once', () => {
    const base = sampleSnapshot();
    const p1 = base.pools[0]!;
    const s = sampleSnapshot({
      pools: [
        {
          ...p1,
          pool_id: 'p0',
          ready: false,
          draining: true,
          state: 'draining',
          models: ['old:model'],
          aliases: ['old'],
        },
        p1,
        { ...p1, pool_id: 'p2', models: ['synthetic:llama'] },
      ],
    });
    expect(modelChoices(s)).toEqual(['synthetic', 'old', 'synthetic:llama', 'synthetic-llama-abc', 'old:model']);
  });
});
