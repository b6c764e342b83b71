import type { SseFrame } from '@llama-orch/contracts';
import type { Clock } from '@llama-orch/daemon-support';
import { checkQueued, checkServed } from '../../admission/admission-checks.js';
import { InternalError, InvalidParamsError } from '../../errors.js';
import type { ClusterSlotLeases } from '../../registry/cluster-slot-leases.js';
import type { NodeRegistry } from '../../registry/node-registry.js';
import type { Lease, PoolView } from '../../registry/pool-view.js';
import type { PlacementReason } from '../../scheduling/placement.js';
import type { WaitingLine } from '../../scheduling/scheduler.js';
import type { SessionPool } from '../../sessions/session-store.js';
import type { AttemptOutcome } from '../../upstream/dispatch-attempt.js';
import type { PoolClient } from '../../upstream/pool-client.js';
import { ClusterGate, gatedLine } from './cluster-gate.js';
import { withClusterLease } from './slot-lease-attempt.js';
import type { ClusterTasks } from './cluster-tasks.js';
import { cancelHeldDispatch } from './adoption.js';
import type {
  Admission,
  AdmissionSteps,
  Admitted,
  CoordinatorFactory,
  CoordinatorHost,
  TaskCoordinator,
} from '../task-coordinator.js';
import { mayHaveMoved, unlessMoved } from './handoff.js';
import type { TaskRecord } from '../task-record.js';

export interface SharedCoordinatorOptions {
  /** The cluster's queue and task records. */
  cluster: ClusterTasks;
  /** Cluster slot leases: each dispatch also holds one, so replicas never overfill a pool together. */
  leases?: ClusterSlotLeases | undefined;
  registry: NodeRegistry;
  poolClient: PoolClient;
  clock: Clock;
}

/**
 * Replicas sharing the cluster store (spec 65): the cluster's queue holds the capacity, the
 * policy and the order ({@link ClusterTasks}); this replica's queue mirrors the tasks it admitted.
 * A task leaves it only through the {@link ClusterGate} (first of its model in the cluster's queue,
 * its record moved to `running` under this replica's fence), runs under a cluster slot lease,
 * goes back through the cluster's queue, and ends once its record holds the end. Tasks of dead
 * replicas come in through the host's `adopt`; a task another replica took over leaves through a
 * handoff.
 */
export class SharedCoordinator implements TaskCoordinator {
  // No frame comes between a dispatch and its first token: another replica that takes the task over numbers them alike.
  readonly runningFrames = false;
  readonly #cluster: ClusterTasks;
  readonly #leases: ClusterSlotLeases | undefined;
  readonly #gate: ClusterGate;
  readonly #registry: NodeRegistry;
  readonly #poolClient: PoolClient;
  readonly #clock: Clock;
  readonly #host: CoordinatorHost;

  /** The factory of a replica's task service: the cluster's queue holds the capacity, this one's is unbounded. */
  static factory(options: SharedCoordinatorOptions): CoordinatorFactory {
    return { localCapacity: Number.MAX_SAFE_INTEGER, create: (host) => new SharedCoordinator(options, host) };
  }

  constructor(options: SharedCoordinatorOptions, host: CoordinatorHost) {
    this.#cluster = options.cluster;
    this.#leases = options.leases;
    this.#registry = options.registry;
    this.#poolClient = options.poolClient;
    this.#clock = options.clock;
    this.#host = host;
    const cluster = options.cluster;
    // The host does all the gate asks of the task service.
    this.#gate = new ClusterGate(cluster, host.queue, host, options.leases);
  }

  get reattachMs(): number {
    return this.#cluster.reattachMs;
  }

  /**
   * One round trip. The checks that need neither the queue nor the session run here first; the
   * budget and the deadline are decided in the store's admission step, on the queue and session as
   * they are there (the deadline as the most tasks ahead it allows), together with capacity,
   * policy and position (cluster-tasks.ts).
   */
  async admit(a: Admission, steps: AdmissionSteps): Promise<Admitted> {
    const r = a.request;
    const cluster = this.#cluster;
    const { availability: avail, listed } = checkServed(steps.checkInput(r));
    const now = this.#clock.now();
    const shared = {
      request: r,
      admittedAt: now,
      modelName: a.modelName,
      correlationId: a.correlationId,
      clientKey: a.clientKey,
      delivery: a.delivery ?? 'events',
      door: a.door ?? 'v2',
      trace: a.trace,
    };
    const added = await cluster.add(shared, steps.maxAhead(r, listed));
    if (added.kind === 'exists') {
      // The same request again (a client's retry, or a balancer that re-sent the POST of a replica that died answering it): answered as admitted.
      if (await cluster.admittedAlready({ id: r.task_id, request: r }))
        return {
          task_id: r.task_id,
          queue_position: 0,
          predicted_start_ms: 0,
          backoff_ms: 0,
          preparation: { steps: [] },
          dispatched: false,
        };
      throw new InvalidParamsError(`task_id: task ${r.task_id} already exists`);
    }
    const { view } = added;
    // Refused in the store: the same typed error as in-process (checkQueued throws it on the view the store read).
    if (added.kind === 'spent' || added.kind === 'late') {
      checkQueued(steps.checkInput(r, view.ahead, view.budgetRemaining), listed);
      throw new InternalError(
        `the cluster store refused the task (${added.kind}) where this replica's checks pass; resubmit it`,
        { retriable: true, retryAfterMs: 1000 },
      );
    }
    // Not re-checked: the predictor may have learnt something during the round trip, but the task is admitted.
    const prediction = steps.predict(r, view.ahead, listed);
    const task = steps.record(
      a,
      { lastPool: view.lastPool, budgetRemaining: view.budgetRemaining },
      prediction,
      avail,
      now,
    );
    // Full means full to its capacity: the cluster's queue holds that many now.
    if (added.kind === 'full') throw steps.queueFull(task, added.policy, prediction, steps.admissionCapacity);
    cluster.hold(task, added.fence);
    if (!steps.open(task.id)) {
      cluster.withdraw(task, 'orchestratord is shutting down');
      throw new InternalError('orchestratord is shutting down', { retriable: true, retryAfterMs: 1000 });
    }
    const queue = this.#host.queue;
    queue.enqueue(task.id, r.priority, task, task.deadlineAt);
    // An evicted task of another replica is ended there (its owner finds its entry gone).
    const victim = added.evicted === undefined ? undefined : this.#host.table.live(added.evicted.id);
    if (victim !== undefined) queue.remove(victim.id);
    return steps.accepted(task, added.position, avail, prediction, victim?.state === 'queued' ? victim : undefined);
  }

  line(): WaitingLine<TaskRecord> {
    return gatedLine(this.#host.queue, this.#cluster);
  }

  assigned(task: TaskRecord, view: PoolView, lease: Lease, reason: PlacementReason): void {
    this.#gate.assigned(task, view, lease, reason);
  }

  claiming(): Record<'interactive' | 'batch', number> {
    return this.#gate.claiming();
  }

  attempt(
    task: TaskRecord,
    view: PoolView,
    resume: boolean,
    held: string | undefined,
    run: () => Promise<AttemptOutcome>,
  ): Promise<AttemptOutcome> {
    return this.#leases === undefined ? run() : withClusterLease(this.#leases, view, task.id, run, resume, held);
  }

  settle(task: TaskRecord, outcome: AttemptOutcome, settle: () => void): void {
    if (task.state !== 'running' || !mayHaveMoved(task, outcome)) return settle();
    unlessMoved(task, this.#cluster, settle, (to) => this.#host.handOff(task, to)).catch((err: unknown) =>
      this.#host.crashed(task, err),
    );
  }

  /** Back in the cluster's queue before this replica may take it again; a cancel meanwhile takes it out again. */
  requeue(task: TaskRecord): void {
    this.#cluster.requeue(task, this.#clock.now()).then(
      () => (task.state === 'queued' ? this.#host.requeued(task) : this.#cluster.dequeue(task.id)),
      (err: unknown) =>
        this.#host.fail(
          task,
          'STORE_UNAVAILABLE',
          `cluster store unreachable: ${err instanceof Error ? err.message : String(err)}`,
          true,
        ),
    );
  }

  /** Clients get the end once the shared record holds it (ClusterTasks.ended). */
  ended(
    task: TaskRecord,
    frame: SseFrame,
    served: SessionPool | undefined,
    queued: boolean,
    deliver: () => void,
  ): void {
    this.#cluster.ended(task, frame, served, queued, deliver);
  }

  movedAway(task: TaskRecord): void {
    this.#cluster.forget(task.id);
  }

  abortHeld(task: TaskRecord): void {
    cancelHeldDispatch(this.#registry, this.#poolClient, task);
  }

  tick(now: number): void {
    this.#gate.tick(now);
  }

  close(): Promise<void> {
    return this.#cluster.close();
  }
}
