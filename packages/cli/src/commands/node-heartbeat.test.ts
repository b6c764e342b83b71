import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO } from '../testing/up-cluster.js';
import { nodeHeartbeatEnv } from './node-heartbeat.js';

describe('nodeHeartbeatEnv', () => {
  const dir = mkdtempSync(join(tmpdir(), 'llorch-hb-'));
  const dev = readFileSync(join(REPO, 'requirements', 'cpu-dev.yaml'), 'utf8');

  it("gives orchestratord the pool config's heartbeat interval, unless the environment sets one", () => {
    const path = join(dir, 'pool.yaml');
    writeFileSync(path, dev.replace(/heartbeat_interval_ms: \d+/, 'heartbeat_interval_ms: 1000'));
    expect(nodeHeartbeatEnv(path, {})).toEqual({ ORCHD_NODE_HEARTBEAT_MS: '1000' });
    expect(nodeHeartbeatEnv(join(REPO, 'requirements', 'cpu-dev.yaml'), {})).toEqual({
      ORCHD_NODE_HEARTBEAT_MS: '5000',
    });
    expect(nodeHeartbeatEnv(path, { ORCHD_NODE_HEARTBEAT_MS: '250' })).toEqual({});
  });

  it('leaves it to pool-managerd to report a config it cannot read', () => {
    expect(nodeHeartbeatEnv(join(dir, 'missing.yaml'), {})).toEqual({});
    const bad = join(dir, 'bad.yaml');
    writeFileSync(bad, 'pools: [');
    expect(nodeHeartbeatEnv(bad, {})).toEqual({});
  });
});
