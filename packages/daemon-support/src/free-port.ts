import { createServer } from 'node:net';

/**
 * A loopback port free right now (the kernel's pick for port 0). Another process may take it
 * before the caller binds it (`llorch up` then reports that daemon's bind failure; tests retry or fail).
 */
export function freeLoopbackPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr !== null ? addr.port : 0;
      srv.close(() => (port > 0 ? resolve(port) : reject(new Error('the kernel gave no port'))));
    });
  });
}
