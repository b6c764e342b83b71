import { describe, expect, it } from 'vitest';
import { ensureRedisServer } from './redis-server.js';

describe('ensureRedisServer', () => {
  it('without the binary and without root it fails with the command to run (never a skip)', async () => {
    await expect(ensureRedisServer({ path: '/nonexistent/redis-server', canInstall: false })).rejects.toThrow(
      /\/nonexistent\/redis-server is missing and this process is not root.*sudo apt-get update && sudo apt-get install -y redis-server/,
    );
  });
});
