import type { TaskRequest } from '@llama-orch/contracts';
import type { Log } from '@llama-orch/daemon-support';
import type { StoredOutcome } from './end-writer.js';
import type { Delivery, TaskPlacement } from '../task-record.js';
import type { TaskLifecycle } from '../task-lifecycle.js';

// What the cluster's side of the task service (cluster-tasks.ts) keeps in and reads from the store.

/** What the record of a task says to another replica (`GET` of a task it does not own). */
export interface SharedTaskRecord {
  readonly model_ref: string;
  readonly priority: string;
  readonly session_id: string | undefined;
  readonly admitted_at: number;
  /** The owner's advertised base URL: other replicas pass requests for the task there. */
  readonly owner_url: string | undefined;
  /** What another replica needs to take the task over when its owner dies (absent in records of older replicas). */
  readonly request?: TaskRequest;
  readonly model_name?: string;
  readonly correlation_id?: string;
  readonly client_key?: string;
  readonly delivery?: Delivery;
  readonly door?: string;
  /** The task span's W3C traceparent (with tracing on): a replica that takes the task over continues its trace. */
  readonly traceparent?: string | undefined;
}

/** Where a task's attempt runs, as its shared record keeps it: `frame_base` is the frame id its first token gets. */
export interface SharedPlacement extends TaskPlacement {
  readonly frame_base: number;
}

/** A task this replica took over from a replica that stopped renewing it (`adoptOrphans`). */
export interface Adoption {
  readonly id: string;
  readonly previousOwner: string;
  readonly state: 'queued' | 'running';
  readonly record: SharedTaskRecord & { readonly request: TaskRequest };
  /** Where it runs, for a running task. */
  readonly placement: SharedPlacement | undefined;
  /** Logger for the task's lines (with its correlation id). */
  readonly log: Log;
  /** Its lifecycle here, held under the fence the takeover won (renewed from the grant on): the adopted record's. */
  readonly life: TaskLifecycle;
}

/** The replica that owns a task, and where it listens. */
export interface TaskOwner {
  readonly replica: string;
  /** The fence it holds the task under (what a {@link ClusterTasks.seize} expects to find). */
  readonly fence: number;
  readonly address: string;
  /** The task ended (its record stays readable for a while). */
  readonly ended: boolean;
  /** An ended task's terminal frame as its owner wrote it, with that frame's id when known. */
  readonly outcome?: StoredOutcome | undefined;
  /** The key that admitted the task (its record's `client_key`): who besides operators may reach it. */
  readonly clientKey: string | undefined;
}

/**
 * The cluster's slot leases as a takeover uses them (registry/cluster-slot-leases.ts): a dead
 * replica's running tasks are found through the leases their dispatches hold, and a task taken
 * over gives back the leases its dead owner took.
 */
export interface TakeoverSlots {
  /** The pools whose leases to look through (`candidateKey`): those this replica knows. */
  pools(): readonly string[];
  /** The tasks holding live leases of the pool. */
  holders(poolKey: string): Promise<string[]>;
  /** Gives back the task's leases on the pool that another replica took; never rejects. */
  releaseTask(poolKey: string, taskId: string): Promise<void>;
}
