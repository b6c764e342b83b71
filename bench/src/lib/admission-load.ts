import { randomUUID } from 'node:crypto';
import autocannon, { type AutocannonResult } from 'autocannon';

/**
 * The admission load (autocannon): each connection admits a task for a model whose pools are all
 * busy, then cancels it, so the queue never holds more than one task per connection. Used by the
 * `admission` and `replicas` benchmarks.
 */

export interface PhaseResult {
  result: AutocannonResult;
  latencies: number[];
  admitted: number;
  canceled: number;
  otherStatus: Record<string, number>;
  sampleBodies: string[];
}

function taskBody(model: string): string {
  return JSON.stringify({
    task_id: randomUUID(),
    session_id: randomUUID(),
    workload: 'completion',
    model_ref: model,
    engine: 'llamacpp',
    ctx: 0,
    priority: 'interactive',
    prompt: 'Write a haiku about queues.',
    max_tokens: 32,
    deadline_ms: 3_600_000,
  });
}

/**
 * Request bodies made before the run: on a 2-core machine the load generator shares the CPU with
 * orchestratord, so it should spend as little as it can per request (each body is still a fresh
 * task_id/session_id, used once).
 */
function bodies(n: number, model: string): () => string {
  let pool = Array.from({ length: n }, () => taskBody(model));
  let next = 0;
  return () => {
    // A used-up batch is replaced by fresh bodies: a task id is never sent twice.
    if (next === pool.length) {
      pool = Array.from({ length: n }, () => taskBody(model));
      next = 0;
    }
    return pool[next++] as string;
  };
}

/** The task id of a 202 body without parsing the whole document. */
function taskIdOf(text: string): string | undefined {
  const at = text.indexOf('"task_id":"');
  if (at < 0) return undefined;
  const start = at + 11;
  const end = text.indexOf('"', start);
  return end < 0 ? undefined : text.slice(start, end);
}

/**
 * One autocannon phase. Every connection loops over two requests: POST /v2/tasks with a fresh
 * task, then POST /v2/tasks/{id}/cancel for the task it just admitted, so at most `connections`
 * tasks are ever queued. Only the 202s count as admissions and only their latencies are kept.
 */
export async function admissionPhase(
  orchUrl: string,
  token: string,
  model: string,
  seconds: number,
  connections: number,
): Promise<PhaseResult> {
  let admitted = 0;
  let canceled = 0;
  const otherStatus: Record<string, number> = {};
  const sampleBodies: string[] = [];
  const latencies: number[] = [];
  const auth = `Bearer ${token}`;
  const nextBody = bodies(seconds * 12_000, model);
  const instance = autocannon({
    url: orchUrl,
    connections,
    pipelining: 1,
    duration: seconds,
    requests: [
      {
        method: 'POST',
        path: '/v2/tasks',
        headers: { 'content-type': 'application/json', authorization: auth },
        setupRequest: (req) => ({ ...req, body: nextBody() }),
        onResponse: (status, text, context) => {
          if (status === 202) {
            admitted += 1;
            context.taskId = taskIdOf(text);
          } else {
            context.taskId = undefined;
            otherStatus[status] = (otherStatus[status] ?? 0) + 1;
            if (sampleBodies.length < 3) sampleBodies.push(`${status} ${text.slice(0, 300)}`);
          }
        },
      },
      {
        method: 'POST',
        headers: { authorization: auth },
        // No admitted task (refused): start the loop again with a new admission.
        setupRequest: (req, context) =>
          typeof context.taskId === 'string' ? { ...req, path: `/v2/tasks/${context.taskId}/cancel` } : undefined,
        onResponse: (status) => {
          if (status === 204) canceled += 1;
          else otherStatus[`cancel ${status}`] = (otherStatus[`cancel ${status}`] ?? 0) + 1;
        },
      },
    ],
  });
  instance.on('response', (_client: unknown, status: number, _bytes: number, ms: number) => {
    if (status === 202) latencies.push(ms);
  });
  const result = await instance;
  return { result, latencies, admitted, canceled, otherStatus, sampleBodies };
}
