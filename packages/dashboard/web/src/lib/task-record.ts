import type { TaskInfo } from '@llama-orch/contracts';
import { ApiError, type ApiClient } from './api.js';
import { formatClock, formatDuration } from './format.js';

/** What `GET /v2/tasks/{id}` told the page: the record, or that there is none it may see. */
export type TaskLookup =
  | { readonly kind: 'found'; readonly task: TaskInfo }
  /** 404: never existed, past the retention (`ORCHD_TASK_RETENTION_MS`), or another client key's. */
  | { readonly kind: 'gone' };

/** A 200 whose body is not a TaskInfo (an older or newer orchestratord, a proxy's page). */
export class MalformedTaskError extends Error {
  override readonly name = 'MalformedTaskError';
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const TASK_STATES: ReadonlySet<unknown> = new Set(['queued', 'running', 'ended']);

/**
 * Whether `v` has the fields the detail view reads, not every field (as with snapshots, the
 * contract's zod schema stays out of the bundle; orchestratord serialises the record through it).
 */
function isTaskInfo(v: unknown): v is TaskInfo {
  return (
    isObject(v) &&
    typeof v.task_id === 'string' &&
    TASK_STATES.has(v.state) &&
    typeof v.model === 'string' &&
    typeof v.model_ref === 'string' &&
    typeof v.priority === 'string' &&
    typeof v.admitted_at === 'number' &&
    typeof v.attempts === 'number' &&
    isObject(v.usage) &&
    typeof v.usage.tokens_out === 'number' &&
    isObject(v.timings) &&
    (v.outcome === undefined || (isObject(v.outcome) && typeof v.outcome.result === 'string'))
  );
}

/**
 * `GET /v2/tasks/{id}` with the page's key. 404 is an answer (`gone`), not an error; any other
 * refusal throws the ApiClient's typed error (a 401 also shows the key form), a malformed record
 * MalformedTaskError.
 */
export async function fetchTask(api: ApiClient, taskId: string, signal?: AbortSignal): Promise<TaskLookup> {
  let res: Response;
  try {
    res = await api.request(`/v2/tasks/${encodeURIComponent(taskId)}`, {
      headers: { accept: 'application/json' },
      ...(signal === undefined ? {} : { signal }),
    });
  } catch (err) {
    if (err instanceof ApiError && err.status === 404) return { kind: 'gone' };
    throw err;
  }
  const body: unknown = await res.json().catch(() => undefined);
  if (!isTaskInfo(body))
    throw new MalformedTaskError('orchestratord answered with something that is not a task record');
  return { kind: 'found', task: body };
}

/** One line of the detail view: `key` names it for tests and styles (`data-fact`). */
export interface TaskFact {
  readonly key: string;
  readonly label: string;
  readonly value: string;
}

/** An ended task's outcome in words: `completed (eos, finish reason stop)`, `canceled`, `error: WORKER_RESET — engine died`. */
export function describeOutcome(t: TaskInfo): string {
  const o = t.outcome;
  if (o === undefined) return t.state === 'ended' ? 'ended' : 'not ended yet';
  if (o.result === 'error') return o.error === undefined ? 'error' : `error: ${o.error.code} — ${o.error.message}`;
  const why = [o.stop_type, o.finish_reason === undefined ? undefined : `finish reason ${o.finish_reason}`].filter(
    (s): s is string => s !== undefined,
  );
  return why.length === 0 ? o.result : `${o.result} (${why.join(', ')})`;
}

/**
 * What the detail view lists, in order: state (with the queue place while queued), model (and the
 * ref an alias resolved to), priority, workload and the API it came through, node and pool,
 * outcome, usage, timings, clock times and the correlation id. Facts the record does not have yet
 * are left out, not dashed.
 */
export function taskFacts(t: TaskInfo): TaskFact[] {
  const facts: TaskFact[] = [];
  const add = (key: string, label: string, value: string | undefined): void => {
    if (value !== undefined) facts.push({ key, label, value });
  };
  const joined = (parts: Array<string | undefined>): string | undefined => {
    const kept = parts.filter((p): p is string => p !== undefined);
    return kept.length === 0 ? undefined : kept.join(', ');
  };
  const queue =
    t.state === 'queued'
      ? joined([
          t.queue_position === undefined ? undefined : `${t.queue_position} ahead`,
          t.predicted_start_ms === undefined
            ? undefined
            : `first token predicted in ${formatDuration(t.predicted_start_ms)}`,
        ])
      : undefined;
  add('state', 'State', queue === undefined ? t.state : `${t.state} (${queue})`);
  add('model', 'Model', t.model === t.model_ref ? t.model : `${t.model} (${t.model_ref})`);
  add('priority', 'Priority', t.priority);
  add('workload', 'Workload', `${t.workload} via ${t.door}`);
  add(
    'placement',
    'Node / pool',
    t.pool_id === undefined
      ? undefined
      : `${t.node_id ?? '—'} / ${t.pool_id} (${t.attempts === 1 ? '1 attempt' : `${t.attempts} attempts`})`,
  );
  add('outcome', 'Outcome', describeOutcome(t));
  const u = t.usage;
  add(
    'usage',
    'Usage',
    joined([
      u.tokens_in === undefined
        ? undefined
        : `${u.tokens_in} prompt tokens${u.cached_tokens === undefined ? '' : ` (${u.cached_tokens} cached)`}`,
      `${u.tokens_out} generated`,
    ]),
  );
  const tm = t.timings;
  add(
    'timings',
    'Timings',
    joined([
      tm.queued_ms === undefined ? undefined : `queued ${formatDuration(tm.queued_ms)}`,
      tm.first_token_ms === undefined ? undefined : `first token ${formatDuration(tm.first_token_ms)}`,
      tm.total_ms === undefined ? undefined : `total ${formatDuration(tm.total_ms)}`,
    ]),
  );
  add('admitted', 'Admitted', formatClock(t.admitted_at));
  add('ended', 'Ended', tm.ended_at === undefined ? undefined : formatClock(tm.ended_at));
  add('correlation', 'Correlation id', t.correlation_id);
  return facts;
}
