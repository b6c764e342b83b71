import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { formatSseFrame } from '@llama-orch/contracts';

export interface FixtureOrchestrator {
  url: string;
  /** `METHOD path auth=<authorization header>` per request, in arrival order. */
  seen: string[];
  /** Parsed JSON bodies of POST requests (tasks, drain, reload), in arrival order. */
  bodies: Array<Record<string, unknown>>;
  close(): Promise<void>;
}

export interface FixtureOptions {
  /** Other bearers get a 401 envelope. */
  token?: string;
  /** Keep the event stream open after `frames` until the task is cancelled (then `end {canceled}`). */
  holdOpen?: boolean;
  /** Canned answers by `METHOD path` (e.g. `GET /v2/nodes`): status and body (JSON unless a string). */
  routes?: Record<string, { status: number; body?: unknown }>;
}

const TASK_ID = '00000000-0000-4000-8000-000000000001';

/**
 * Just enough of orchestratord for the CLI's client: `POST /v2/tasks` answers 202 with stream URLs
 * (the body is kept for assertions), `GET …/events` streams `frames` one per tick, so the client
 * sees them incrementally; `POST /v2/tasks/{id}/cancel` answers 204 and ends a held stream with a
 * canceled end frame; `routes` answers anything else.
 */
export async function fixtureOrchestrator(frames: string[], opts: FixtureOptions = {}): Promise<FixtureOrchestrator> {
  const seen: string[] = [];
  const bodies: Array<Record<string, unknown>> = [];
  /** Open event streams: a cancel ends each at once with a canceled end frame. */
  const open = new Set<() => void>();
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const key = `${req.method} ${req.url}`;
    seen.push(`${key} auth=${req.headers.authorization ?? ''}`);
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    if (opts.token && req.headers.authorization !== `Bearer ${opts.token}`) {
      res
        .writeHead(401, { 'content-type': 'application/json' })
        .end(JSON.stringify({ code: 'UNAUTHORIZED', message: 'bad token' }));
      return;
    }
    let raw = '';
    req.on('data', (c: Buffer) => {
      raw += c.toString();
    });
    req.on('end', () => {
      if (req.method === 'POST' && raw) bodies.push(JSON.parse(raw) as Record<string, unknown>);
      const canned = opts.routes?.[key];
      if (canned !== undefined) {
        const text =
          typeof canned.body === 'string' ? canned.body : canned.body === undefined ? '' : JSON.stringify(canned.body);
        res
          .writeHead(canned.status, {
            'content-type': typeof canned.body === 'string' ? 'text/plain' : 'application/json',
          })
          .end(text);
        return;
      }
      if (key === 'POST /v2/tasks') {
        const task = bodies[bodies.length - 1] ?? {};
        // orchestratord fills a missing task_id in; so does the fixture
        const taskId = typeof task.task_id === 'string' ? task.task_id : TASK_ID;
        res.writeHead(202, { 'content-type': 'application/json' }).end(
          JSON.stringify({
            task_id: taskId,
            queue_position: 0,
            predicted_start_ms: 5,
            backoff_ms: 0,
            streams: {
              sse: `${base}/v2/tasks/${taskId}/events`,
              sse_verbose: `${base}/v2/tasks/${taskId}/events?verbose=true`,
            },
            preparation: { steps: [] },
          }),
        );
        return;
      }
      if (req.method === 'POST' && /^\/v2\/tasks\/[^/]+\/cancel$/.test(req.url ?? '')) {
        res.writeHead(204).end();
        for (const cancel of open) cancel();
        open.clear();
        return;
      }
      if (req.method === 'GET' && /\/events/.test(req.url ?? '')) {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        let i = 0;
        const tick = setInterval(() => {
          if (i < frames.length) res.write(frames[i++]!);
          else {
            clearInterval(tick);
            if (!opts.holdOpen) {
              open.delete(cancel);
              res.end();
            }
          }
        }, 5);
        const cancel = (): void => {
          clearInterval(tick);
          res.end(
            formatSseFrame(99, {
              event: 'end',
              data: { tokens_out: 1, decode_ms: 1, decode_time_ms: 1, canceled: true, stop_type: 'cancel' },
            }),
          );
        };
        open.add(cancel);
        return;
      }
      res
        .writeHead(404, { 'content-type': 'application/json' })
        .end(JSON.stringify({ code: 'NOT_FOUND', message: `${key} not found` }));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    seen,
    bodies,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
