import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface FixtureOrchestrator {
  url: string;
  /** `METHOD path auth=<authorization header>` per request, in arrival order. */
  seen: string[];
  /** Parsed JSON bodies of `POST /v2/tasks`, in arrival order. */
  bodies: Array<Record<string, unknown>>;
  close(): Promise<void>;
}

/**
 * Just enough of orchestratord for the CLI's client: `POST /v2/tasks` answers 202 with stream URLs
 * (the body is kept for assertions), any GET streams `frames` one per tick, so the client sees them
 * incrementally. With `token`, other bearers get a 401 envelope.
 */
export async function fixtureOrchestrator(frames: string[], opts: { token?: string } = {}): Promise<FixtureOrchestrator> {
  const seen: string[] = [];
  const bodies: Array<Record<string, unknown>> = [];
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    seen.push(`${req.method} ${req.url} auth=${req.headers.authorization ?? ''}`);
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    if (opts.token && req.headers.authorization !== `Bearer ${opts.token}`) {
      res.writeHead(401, { 'content-type': 'application/json' }).end(JSON.stringify({ code: 'UNAUTHORIZED', message: 'bad token' }));
      return;
    }
    if (req.method === 'POST' && req.url === '/v2/tasks') {
      let body = '';
      req.on('data', (c: Buffer) => { body += c.toString(); });
      req.on('end', () => {
        const task = JSON.parse(body) as Record<string, unknown>;
        bodies.push(task);
        // orchestratord fills a missing task_id in; so does the fixture
        const taskId = typeof task.task_id === 'string' ? task.task_id : '00000000-0000-4000-8000-000000000001';
        res.writeHead(202, { 'content-type': 'application/json' }).end(JSON.stringify({
          task_id: taskId, queue_position: 0, predicted_start_ms: 5, backoff_ms: 0,
          streams: { sse: `${base}/v2/tasks/${taskId}/events`, sse_verbose: `${base}/v2/tasks/${taskId}/events?verbose=true` },
          preparation: { steps: [] },
        }));
      });
      return;
    }
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    let i = 0;
    const tick = setInterval(() => {
      if (i < frames.length) res.write(frames[i++]!);
      else { clearInterval(tick); res.end(); }
    }, 5);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    seen,
    bodies,
    close: () => new Promise<void>((r) => { server.closeAllConnections(); server.close(() => r()); }),
  };
}
