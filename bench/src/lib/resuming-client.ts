import { setTimeout as sleep } from 'node:timers/promises';
import { request, type Dispatcher } from 'undici';
import { SseParser } from './sse.js';

/**
 * A /v2 event-stream client that resumes as a browser's EventSource does: when the stream breaks
 * before its terminal frame it waits `retryMs` and reconnects (to `resumeBase`, the load balancer)
 * with `Last-Event-ID` set to the last frame id it saw. Every frame's arrival is kept.
 */

export interface FollowedTask {
  taskId: string;
  /** Token frame indices (`i`) in arrival order, across connections. */
  indices: number[];
  /** Arrival of each token frame (performance.now(), ms), same order. */
  tokenAt: number[];
  /** The connection (1-based) each token frame came on, same order. */
  tokenConnection: number[];
  /** Arrival of `started` frames. */
  startedAt: number[];
  /** Terminal frames seen (`end` or `error`), with arrival. */
  terminals: Array<{ event: string; at: number; code?: string }>;
  /** Connections opened (1 = never resumed). */
  connections: number;
  /** Answers other than 200 to a (re)connection, or transport errors, in order. */
  refusals: string[];
}

export interface FollowOptions {
  firstBase: string;
  resumeBase: string;
  taskId: string;
  token: string;
  dispatcher: Dispatcher;
  retryMs: number;
  /** Stop reconnecting after this performance.now(). */
  giveUpAt: () => number;
}

function readFrames(
  f: { id: string | undefined; event: string; data: string },
  task: FollowedTask,
  now: number,
): boolean {
  if (f.event === 'token') {
    const d = JSON.parse(f.data) as { i: number };
    task.indices.push(d.i);
    task.tokenAt.push(now);
    task.tokenConnection.push(task.connections);
  } else if (f.event === 'started') {
    task.startedAt.push(now);
  } else if (f.event === 'end' || f.event === 'error') {
    const code = f.event === 'error' ? (JSON.parse(f.data) as { code?: string }).code : undefined;
    task.terminals.push({ event: f.event, at: now, ...(code !== undefined ? { code } : {}) });
    return true;
  }
  return false;
}

export async function followTask(o: FollowOptions): Promise<FollowedTask> {
  const task: FollowedTask = {
    taskId: o.taskId,
    indices: [],
    tokenAt: [],
    tokenConnection: [],
    startedAt: [],
    terminals: [],
    connections: 0,
    refusals: [],
  };
  let lastId: string | undefined;
  let base = o.firstBase;
  for (;;) {
    task.connections += 1;
    let ended = false;
    try {
      const headers: Record<string, string> = { authorization: `Bearer ${o.token}`, accept: 'text/event-stream' };
      if (lastId !== undefined) headers['last-event-id'] = lastId;
      const res = await request(`${base}/v2/tasks/${o.taskId}/events`, { headers, dispatcher: o.dispatcher });
      if (res.statusCode !== 200) {
        task.refusals.push(`${res.statusCode} ${(await res.body.text()).slice(0, 200)}`);
      } else {
        const parser = new SseParser();
        for await (const chunk of res.body) {
          const now = performance.now();
          for (const f of parser.feed((chunk as Buffer).toString('utf8'))) {
            if (f.id !== undefined) lastId = f.id;
            if (readFrames(f, task, now)) ended = true;
          }
        }
      }
    } catch (err) {
      task.refusals.push(`transport: ${(err as Error).message}`);
    }
    if (ended || performance.now() > o.giveUpAt()) return task;
    base = o.resumeBase;
    await sleep(o.retryMs);
  }
}

/** What a followed task's token indices show: gaps (a missing `i`) and duplicates (an `i` seen twice). */
export function indexFaults(indices: readonly number[]): { gaps: number; duplicates: number } {
  const seen = new Set<number>();
  let duplicates = 0;
  let max = -1;
  for (const i of indices) {
    if (seen.has(i)) duplicates += 1;
    seen.add(i);
    if (i > max) max = i;
  }
  return { gaps: max + 1 - seen.size, duplicates };
}
