/**
 * Task records clients look up (`GET /v2/tasks/{id}`, `GET /v2/tasks`): one entry per task, written
 * at admission, at each dispatch and at the end (tasks/task-journal.ts), kept `ttlMs` from each
 * write (a live task's deadline plus the retention; the retention after its end) and at most
 * `maxCount` entries, the oldest admitted dropped first. In-process a bounded map; with Redis one
 * key per entry with its TTL and one index by admission time shared by every replica.
 */
export type TaskRecordState = 'queued' | 'running' | 'ended';

export interface TaskRecordEntry {
  readonly id: string;
  readonly state: TaskRecordState;
  /** The model as the client named it (the list's `model` filter matches it, or `modelRef`). */
  readonly model: string;
  readonly modelRef: string;
  readonly priority: 'interactive' | 'batch';
  /** ms since the epoch: the list's order (newest first) and its `since` filter. */
  readonly admittedAt: number;
  /** The key that admitted it (undefined with auth off): a client key lists only its own. */
  readonly clientKey: string | undefined;
  /** The replica that holds the task (where its live view is). */
  readonly owner: string;
  /** The record as the API shows it (JSON of the contracts' TaskInfo): opaque to the store. */
  readonly body: string;
}

export interface TaskRecordQuery {
  readonly state?: TaskRecordState | undefined;
  /** Matches `model` or `modelRef`. */
  readonly model?: string | undefined;
  readonly priority?: 'interactive' | 'batch' | undefined;
  /** Only entries admitted at or after, ms. */
  readonly since?: number | undefined;
  /** Only this key's entries; undefined: everyone's (an operator, or auth off). */
  readonly clientKey?: string | undefined;
  readonly limit: number;
  /** `next` of the previous page. */
  readonly cursor?: string | undefined;
}

export interface TaskRecordPage {
  /** Newest admitted first (ties by id). */
  readonly entries: TaskRecordEntry[];
  /** Where the next page starts; undefined when none is left. */
  readonly next: string | undefined;
}

export interface TaskRecordStore {
  /** Creates or replaces the entry of `entry.id`, kept `ttlMs` from now. */
  put(entry: TaskRecordEntry, ttlMs: number): Promise<void>;
  get(id: string): Promise<TaskRecordEntry | undefined>;
  /**
   * A page of entries matching the query. A page may hold fewer than `limit` entries with `next`
   * set when the store stopped scanning (it reads a bounded number of entries per call).
   */
  list(query: TaskRecordQuery): Promise<TaskRecordPage>;
  /** Removes the entry; whether one was there. */
  delete(id: string): Promise<boolean>;
}

/** The retention every record store keeps (orchestratord's task_retention_*). */
export interface RecordRetention {
  /** Most entries kept; past it the oldest go first. */
  readonly maxCount: number;
}
