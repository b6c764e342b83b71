import { describe, expect, it } from 'vitest';
import { ensureDebianPackage } from './debian-package.js';

describe('ensureDebianPackage', () => {
  it('returns the program when it is there, without apt', async () => {
    await expect(
      ensureDebianPackage({ pkg: 'coreutils', path: '/bin/sh', who: 'test', canInstall: false }),
    ).resolves.toBe('/bin/sh');
  });

  it('without the program and without root it fails with the command to run (never a skip)', async () => {
    await expect(
      ensureDebianPackage({ pkg: 'haproxy', path: '/nonexistent/haproxy', who: 'test', canInstall: false }),
    ).rejects.toThrow(
      /\/nonexistent\/haproxy is missing and this process is not root.*sudo apt-get update && sudo apt-get install -y haproxy/,
    );
  });
});
