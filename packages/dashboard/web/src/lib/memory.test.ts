import { describe, expect, it } from 'vitest';
import { sampleSnapshot } from '../testing/sample-snapshot.js';
import { memoryUse, nodeModels } from './memory.js';

const MiB = 1024 ** 2;
const GiB = 1024 ** 3;

describe('memory', () => {
  it("a node's on-demand memory: the bar's share and its figures in words", () => {
    expect(memoryUse({ budget_bytes: 2 * GiB, used_bytes: 768 * MiB })).toEqual({
      usedBytes: 768 * MiB,
      budgetBytes: 2 * GiB,
      fraction: 0.375,
      percent: 38,
      text: '768 MiB of 2.0 GiB used (38%)',
    });
    expect(memoryUse({ budget_bytes: 2 * GiB, used_bytes: 0 })).toMatchObject({ fraction: 0, percent: 0 });
    // over the budget (a projection that grew): a full bar, the true figure in words
    expect(memoryUse({ budget_bytes: GiB, used_bytes: 1.5 * GiB })).toMatchObject({
      fraction: 1,
      percent: 150,
      text: '1.5 GiB of 1.0 GiB used (150%)',
    });
    expect(memoryUse({ budget_bytes: 0, used_bytes: 0 })).toMatchObject({ fraction: 0, percent: 0 });
  });

  it("a node's models: on demand or static, memory, idle for how long, busy, or the state of one that does not serve", () => {
    const snap = sampleSnapshot();
    expect(nodeModels(snap, 'n1')).toEqual([
      {
        poolId: 'p1',
        model: 'synthetic:llama',
        aliases: ['synthetic'],
        origin: 'config',
        memoryBytes: 512 * MiB,
        activity: 'idle 30 s',
        idleSince: '2026-11-25T15:59:40.000Z',
      },
      {
        poolId: 'coder-a1b2c3',
        model: 'synthetic:llama?fim=1',
        aliases: ['coder'],
        origin: 'catalog',
        memoryBytes: 256 * MiB,
        activity: 'busy',
        idleSince: undefined,
      },
    ]);
    const [p1, coder] = snap.pools;
    const loading = { ...coder!, state: 'provisioning' as const, ready: false };
    const offline = { ...p1!, node_state: 'offline' as const };
    expect(nodeModels({ ...snap, pools: [loading, offline] }, 'n1').map((m) => m.activity)).toEqual([
      'provisioning',
      'ready (node offline)',
    ]);
    expect(nodeModels(snap, 'elsewhere')).toEqual([]);
  });
});
