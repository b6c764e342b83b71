import { describe, expect, it } from 'vitest';
import { sampleSnapshot } from '../testing/sample-snapshot.js';
import { modelChoices, poolAliases } from './models.js';

describe('models', () => {
  it('a pool\'s aliases come from its node\'s view of it', () => {
    const s = sampleSnapshot();
    expect(poolAliases(s, { node_id: 'n1', pool_id: 'p1' })).toEqual(['synthetic']);
    expect(poolAliases(s, { node_id: 'n9', pool_id: 'p1' })).toEqual([]);
  });

  it('offers aliases first, serving pools before the others, each name once', () => {
    const base = sampleSnapshot();
    const p1 = base.pools[0]!;
    const s = sampleSnapshot({
      pools: [
        { ...p1, pool_id: 'p0', ready: false, draining: true, state: 'draining', models: ['old:model'] },
        p1,
        { ...p1, pool_id: 'p2', models: ['synthetic:llama'] },
      ],
    });
    expect(modelChoices(s)).toEqual(['synthetic', 'synthetic:llama', 'synthetic-llama-abc', 'old:model']);
  });
});
