import { TaskInfoSchema, type TaskInfo, type TaskList } from '@llama-orch/contracts';
import type { TaskRecordEntry, TaskRecordQuery, TaskRecordStore } from '../store/task-record-store.js';
import { taskInfo } from './task-journal.js';
import type { RetainedTask, TaskRecord } from './task-record.js';

/** A task's record as a caller may see it, with what decides who may. */
export interface TaskLookup {
  readonly info: TaskInfo;
  /** The key that admitted it (its owner; undefined with auth off). */
  readonly clientKey: string | undefined;
  /** The replica holding it, when the record came from the store (undefined: it is live here). */
  readonly owner: string | undefined;
}

export interface TaskRecordsOptions {
  readonly store: TaskRecordStore;
  /** The task service's table: a live task here, or an ended one within its stream grace. */
  readonly live: (id: string) => TaskRecord | RetainedTask | undefined;
}

/**
 * Answers `GET /v2/tasks/{id}` and `GET /v2/tasks`: a task this replica holds is read live (its
 * queue position as of the last tick, its tokens so far); any other from the record store the
 * journal writes (task-journal.ts) — an ended task, or one another replica holds, as of its last
 * write (admission, dispatch, end).
 */
export class TaskRecords {
  readonly #store: TaskRecordStore;
  readonly #live: TaskRecordsOptions['live'];

  constructor(o: TaskRecordsOptions) {
    this.#store = o.store;
    this.#live = o.live;
  }

  async get(id: string): Promise<TaskLookup | undefined> {
    const held = this.#held(id);
    if (held !== undefined) return { info: taskInfo(held), clientKey: held.clientKey, owner: undefined };
    const entry = await this.#store.get(id);
    return entry === undefined ? undefined : { info: infoOf(entry), clientKey: entry.clientKey, owner: entry.owner };
  }

  /** A page of records, newest admitted first; tasks live here are read live. */
  async list(query: TaskRecordQuery): Promise<TaskList> {
    const page = await this.#store.list(query);
    const tasks = page.entries.map((entry) => {
      const held = entry.state === 'ended' ? undefined : this.#held(entry.id);
      return held === undefined ? infoOf(entry) : taskInfo(held);
    });
    return page.next === undefined ? { tasks } : { tasks, next_cursor: page.next };
  }

  /** The task when it is live here (an ended one is read from its record: its outcome is there). */
  #held(id: string): TaskRecord | undefined {
    const t = this.#live(id);
    return t !== undefined && t.state !== 'ended' && 'request' in t ? t : undefined;
  }
}

function infoOf(entry: TaskRecordEntry): TaskInfo {
  return TaskInfoSchema.parse(JSON.parse(entry.body));
}
