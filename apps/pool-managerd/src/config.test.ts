import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadSettings } from './config.js';

const dir = mkdtempSync(join(tmpdir(), 'pm-config-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function configFile(extra = ''): string {
  const path = join(dir, `c${Math.random().toString(36).slice(2)}.yaml`);
  writeFileSync(path, `node:\n  id: n1\n${extra}pools:\n  - id: p0\n    model: synthetic:llama\n`);
  return path;
}

describe('pool-managerd token', () => {
  it('config api_token > LLORCH_NODE_TOKEN > LLORCH_API_TOKEN', async () => {
    const node = 'node-token-0123456789abcdef';
    const shared = 'shared-token-0123456789abcdef';
    expect(
      (await loadSettings(['--config', configFile()], { LLORCH_NODE_TOKEN: node, LLORCH_API_TOKEN: shared })).apiToken,
    ).toBe(node);
    expect((await loadSettings(['--config', configFile()], { LLORCH_API_TOKEN: shared })).apiToken).toBe(shared);
    expect(
      (await loadSettings(['--config', configFile('api_token: from-config-0123456789\n')], { LLORCH_NODE_TOKEN: node }))
        .apiToken,
    ).toBe('from-config-0123456789');
    await expect(loadSettings(['--config', configFile()], { LLORCH_NODE_TOKEN: 'short' })).rejects.toThrow(
      /at least 16/,
    );
  });
});
