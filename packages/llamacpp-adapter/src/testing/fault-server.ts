import { createServer, type ServerResponse, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * Fault fixture: an HTTP server that answers `/completion` with a scripted raw body, to produce the
 * engine behaviours that are hard to trigger on demand (cut streams, error frames, pings).
 */
export async function faultServer(
  handler: (res: ServerResponse) => void,
): Promise<{ url: string; close: () => Promise<void> }> {
  const server: Server = createServer((req, res) => {
    req.resume();
    req.on('end', () => handler(res));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
