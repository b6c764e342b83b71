import { TaskInfoSchema, TaskListSchema, type TaskInfo, type TaskList, type TaskState } from '@llama-orch/contracts';
import { PLAIN, type Paint } from '../color.js';
import { callJson, type Target } from '../http.js';
import { renderTable } from '../table.js';

/** The filters of `llorch tasks`, as `GET /v2/tasks` takes them. */
export interface TaskFilters {
  state?: TaskState | undefined;
  model?: string | undefined;
  priority?: 'interactive' | 'batch' | undefined;
  /** Admitted at or after this time, ms since the epoch. */
  since?: number | undefined;
}

/** Largest page `GET /v2/tasks` serves (TaskListQuerySchema's `limit` maximum). */
const PAGE_MAX = 500;

/**
 * `GET /v2/tasks`, newest first, following `next_cursor` until `limit` tasks are in hand or the
 * list ends. Each page asks only for what is still missing, so the `next_cursor` returned (when
 * the list goes on) continues right after the last task listed.
 */
export async function listTasks(target: Target, filters: TaskFilters, limit: number): Promise<TaskList> {
  const tasks: TaskInfo[] = [];
  const seen = new Set<string>();
  let cursor: string | undefined;
  for (;;) {
    const query = new URLSearchParams();
    if (filters.state !== undefined) query.set('state', filters.state);
    if (filters.model !== undefined) query.set('model', filters.model);
    if (filters.priority !== undefined) query.set('priority', filters.priority);
    if (filters.since !== undefined) query.set('since', String(filters.since));
    query.set('limit', String(Math.min(PAGE_MAX, limit - tasks.length)));
    if (cursor !== undefined) query.set('cursor', cursor);
    const page = await callJson(target, 'GET', `/v2/tasks?${query.toString()}`, TaskListSchema);
    tasks.push(...page.tasks.slice(0, limit - tasks.length));
    cursor = page.next_cursor;
    // A page may be short, even empty, with a cursor (the store reads a bounded number of records
    // per call): only the end of the list, enough tasks, or a cursor seen before (a loop) stop it.
    if (cursor === undefined || seen.has(cursor) || tasks.length >= limit)
      return cursor === undefined ? { tasks } : { tasks, next_cursor: cursor };
    seen.add(cursor);
  }
}

/** `GET /v2/tasks/{id}`: 404 NOT_FOUND for an unknown or expired task, or another key's. */
export async function getTask(target: Target, taskId: string): Promise<TaskInfo> {
  return callJson(target, 'GET', `/v2/tasks/${encodeURIComponent(taskId)}`, TaskInfoSchema);
}

/** `1.2 s`, `340 ms`, `3m05s`, `2h10m`, `4d03h`: a duration as an operator reads it. */
export function formatMs(ms: number | undefined): string {
  if (ms === undefined || !Number.isFinite(ms)) return '-';
  const v = Math.max(0, ms);
  if (v < 1000) return `${Math.round(v)} ms`;
  if (v < 60_000) return `${(v / 1000).toFixed(1)} s`;
  const s = Math.floor(v / 1000);
  const two = (n: number): string => String(n).padStart(2, '0');
  if (s < 3600) return `${Math.floor(s / 60)}m${two(s % 60)}s`;
  if (s < 86_400) return `${Math.floor(s / 3600)}h${two(Math.floor(s / 60) % 60)}m`;
  return `${Math.floor(s / 86_400)}d${two(Math.floor(s / 3600) % 24)}h`;
}

/** Where the task runs or ran: `node/pool`, or `-` before its first dispatch. */
function placement(t: TaskInfo): string {
  if (t.pool_id === undefined) return '-';
  return t.node_id === undefined ? t.pool_id : `${t.node_id}/${t.pool_id}`;
}

/** An ended task's outcome in one word or two (`completed (eos)`, `canceled`, `error: WORKER_RESET`); its queue place while queued. */
export function outcomeText(t: TaskInfo): string {
  const o = t.outcome;
  if (o === undefined) {
    if (t.state === 'queued' && t.queue_position !== undefined) return `queued, ${t.queue_position} ahead`;
    return '-';
  }
  if (o.result === 'error') return o.error === undefined ? 'error' : `error: ${o.error.code}`;
  const why = o.stop_type ?? o.finish_reason;
  return o.result === 'completed' && why !== undefined ? `completed (${why})` : o.result;
}

/** `llorch tasks`: one line per task, newest first. */
export function renderTasks(tasks: readonly TaskInfo[], paint: Paint = PLAIN, nowMs: number = Date.now()): string {
  if (tasks.length === 0) return 'no tasks';
  return renderTable(
    [
      ['TASK', 'STATE', 'MODEL', 'PRIORITY', 'POOL', 'TOKENS OUT', 'TTFT', 'AGE', 'OUTCOME'],
      ...tasks.map((t) => [
        t.task_id,
        t.state,
        t.model,
        t.priority,
        placement(t),
        String(t.usage.tokens_out),
        formatMs(t.timings.first_token_ms),
        formatMs(nowMs - t.admitted_at),
        outcomeText(t),
      ]),
    ],
    taskColour(paint),
  );
}

/** State: running green, queued yellow, ended dim; an outcome other than completed is red (canceled yellow). */
function taskColour(paint: Paint): (cell: string, col: number, row: number) => string {
  return (cell, col, row) => {
    if (row === 0 || !paint.enabled) return cell;
    if (col === 1) {
      if (cell.startsWith('running')) return paint.green(cell);
      if (cell.startsWith('queued')) return paint.yellow(cell);
      return paint.dim(cell);
    }
    if (col === 8) {
      if (cell.startsWith('error')) return paint.red(cell);
      if (cell.startsWith('canceled')) return paint.yellow(cell);
    }
    return cell;
  };
}

/** `llorch task <id>`: one fact per line, labels aligned; lines without a fact are left out. */
export function renderTask(t: TaskInfo, nowMs: number = Date.now()): string {
  const when = (at: number | undefined): string | undefined =>
    at === undefined ? undefined : `${new Date(at).toISOString()} (${formatMs(nowMs - at)} ago)`;
  const list = (parts: Array<string | undefined>): string | undefined => {
    const kept = parts.filter((p): p is string => p !== undefined);
    return kept.length === 0 ? undefined : kept.join(', ');
  };
  const o = t.outcome;
  const outcome =
    o === undefined
      ? undefined
      : list([
          o.result,
          o.stop_type === undefined ? undefined : `stop ${o.stop_type}`,
          o.finish_reason === undefined ? undefined : `finish reason ${o.finish_reason}`,
          o.error === undefined ? undefined : `${o.error.code}: ${o.error.message}`,
        ]);
  const u = t.usage;
  const tm = t.timings;
  const rows: Array<[string, string | undefined]> = [
    ['task', t.task_id],
    ['state', t.state],
    ['model', t.model === t.model_ref ? t.model : `${t.model} (${t.model_ref})`],
    ['priority', t.priority],
    ['workload', `${t.workload} via ${t.door}`],
    ['correlation', t.correlation_id],
    ['admitted', when(t.admitted_at)],
    [
      'queue',
      t.state === 'queued'
        ? list([
            t.queue_position === undefined ? undefined : `${t.queue_position} ahead`,
            t.predicted_start_ms === undefined ? undefined : `predicted start ${formatMs(t.predicted_start_ms)}`,
          ])
        : undefined,
    ],
    ['pool', t.pool_id === undefined ? undefined : `${placement(t)} (attempts ${t.attempts})`],
    ['outcome', outcome],
    [
      'usage',
      list([
        u.tokens_in === undefined ? undefined : `${u.tokens_in} tokens in`,
        u.cached_tokens === undefined ? undefined : `${u.cached_tokens} cached`,
        `${u.tokens_out} tokens out`,
      ]),
    ],
    [
      'timings',
      list([
        tm.queued_ms === undefined ? undefined : `queued ${formatMs(tm.queued_ms)}`,
        tm.first_token_ms === undefined ? undefined : `first token ${formatMs(tm.first_token_ms)}`,
        tm.total_ms === undefined ? undefined : `total ${formatMs(tm.total_ms)}`,
      ]),
    ],
    ['dispatched', when(tm.dispatched_at)],
    ['first token', when(tm.first_token_at)],
    ['ended', when(tm.ended_at)],
  ];
  const shown = rows.filter((r): r is [string, string] => r[1] !== undefined);
  const width = Math.max(...shown.map(([label]) => label.length));
  return shown.map(([label, value]) => `${label.padEnd(width)}  ${value}`).join('\n');
}
