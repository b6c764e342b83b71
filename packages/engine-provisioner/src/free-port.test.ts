import { createServer, type Server } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { findFreePort, selectPort } from './free-port.js';

const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
});

function occupy(port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    servers.push(s);
    s.once('error', reject);
    s.listen({ port, host: '127.0.0.1' }, () => {
      const a = s.address();
      resolve(typeof a === 'object' && a ? a.port : -1);
    });
  });
}

describe('ports', () => {
  it('finds a free loopback port that can be bound', async () => {
    const port = await findFreePort();
    expect(port).toBeGreaterThan(0);
    expect(await occupy(port)).toBe(port);
  });

  it('port 0 asks the OS; a free configured port is kept', async () => {
    const auto = await selectPort(0);
    expect(auto.port).toBeGreaterThan(0);
    const free = await findFreePort();
    expect(await selectPort(free)).toEqual({ port: free, fallback: false });
  });

  it('a taken configured port falls back to another free port', async () => {
    const taken = await occupy(0);
    const sel = await selectPort(taken);
    expect(sel.fallback).toBe(true);
    expect(sel.port).not.toBe(taken);
    expect(await occupy(sel.port)).toBe(sel.port);
  });
});
