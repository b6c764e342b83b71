import type { SseFrame } from '@llama-orch/contracts';
import { systemClock, type Clock, type Log } from '@llama-orch/daemon-support';
import { LeaseKeeper } from '../../support/lease-keeper.js';
import type { AdmissionQueueStore, GoneEntry } from '../../store/admission-queue-store.js';
import type { ClusterSignals } from '../../store/cluster-signals.js';
import type { SessionPoolRef } from '../../store/session-affinity-store.js';
import type {
  AdmitOutcome,
  DispatchRoom,
  TakeDispatchOutcome,
  TaskLifecycleStore,
} from '../../store/task-lifecycle-store.js';
import type { TaskOwnershipStore } from '../../store/task-ownership-store.js';
import { ClusterEndWriter, deliverWhenWritten, storedOutcome, type StoredOutcome } from './end-writer.js';
import { ModelHeads } from './model-heads.js';
import { OwnerLeases } from './owner-leases.js';
import type { Adoption, SharedPlacement, SharedTaskRecord, TakeoverSlots, TaskOwner } from './shared-task-types.js';
import type { TaskPlacement, TaskRecord } from '../task-record.js';
import { seizeFrom, takeOver, type TakeoverDeps } from './takeover.js';

export type { Adoption, SharedPlacement, SharedTaskRecord, TaskOwner } from './shared-task-types.js';

export interface ClusterTasksOptions {
  queue: AdmissionQueueStore;
  tasks: TaskOwnershipStore;
  /** Admission, dispatch and end, one round trip each. */
  lifecycle: TaskLifecycleStore;
  signals: ClusterSignals;
  /** This replica: the owner of the tasks it admits. */
  replicaId: string;
  /** Where the other replicas reach this one (its advertised base URL), once it listens. */
  address: () => string | undefined;
  logger: Log;
  /** How long an ended task's record stays readable, ms (the stream grace). */
  retainMs: number;
  /** A model's first queued task became this replica's: time to pump. */
  changed: () => void;
  /** Owner lease of a task, ms; renewed on every tick of the lease keeper (orphans looked for every 100 ms, {@link ClusterTasks.adoptEveryMs}). @default 15000 */
  ownerTtlMs?: number;
  /** The process's one renewal loop (support/lease-keeper.ts). @default a keeper of its own, every quarter of `ownerTtlMs` */
  keeper?: LeaseKeeper | undefined;
  /** @default systemClock */
  clock?: Clock | undefined;
  /** How long a model's first task is known to be another replica's without a newer signal, ms (then a take finds out). @default 250 */
  blockMs?: number;
  /** The cluster's slot leases: a takeover finds a dead replica's running tasks by them and gives their leases back (shared/takeover.ts). */
  slots?: TakeoverSlots | undefined;
}

/** What the cluster keeps of a task it admits (its shared record). */
export type ClusterAdmission = Pick<
  TaskRecord,
  'request' | 'admittedAt' | 'modelName' | 'correlationId' | 'clientKey' | 'delivery' | 'door' | 'trace'
>;

/** Longest wait between two looks for orphans, ms. */
const ADOPT_EVERY_MS = 100;

/** Entries of each lane the orphan sweep looks at (orphans further back are found as they move up). */
const ORPHAN_SCAN = 16;

/**
 * The cluster's side of the task service with a Redis store. The replica that admits a task owns
 * it and dispatches it (its client is connected here, so the tokens are relayed once), but the
 * cluster's queue decides the order: before a dispatch leaves, the replica `take`s its task from
 * the shared queue, which it may only do when no task of that model ahead of it on any replica
 * would want the slot it leased (`DispatchRoom`). After a `behind`, the queue signals (each model's
 * first task and its owner) block the model here until its first task is this replica's
 * (knowledge older than `blockMs` is not trusted). Every transition of the task's shared record
 * names its fence, so a replica that lost ownership can neither dispatch nor end it. The owner
 * renews its leases in one call every quarter of their life; a replica that stops renewing has its
 * tasks taken over by another ({@link adoptOrphans}).
 */
export class ClusterTasks {
  readonly replicaId: string;
  readonly #queue: AdmissionQueueStore;
  readonly #tasks: TaskOwnershipStore;
  readonly #lifecycle: TaskLifecycleStore;
  readonly #logger: Log;
  readonly #retainMs: number;
  readonly #address: () => string | undefined;
  readonly #ownerTtlMs: number;
  /** The owner leases this replica holds: fences, renewals, tasks let go. */
  readonly #owners: OwnerLeases;
  readonly #heads: ModelHeads;
  readonly #stopRenewing: () => void;
  /** The keeper this instance made for itself (none given): closed with it. */
  readonly #ownKeeper: LeaseKeeper | undefined;
  readonly #clock: Clock;
  readonly #unsubscribe: () => void;
  readonly #pending = new Set<Promise<unknown>>();
  readonly #seizedListeners = new Set<(a: Adoption) => void>();
  readonly #takeover: TakeoverDeps;
  readonly #ends: ClusterEndWriter;
  /** The orphan sweep could not reach the store; then, until when it only takes back this replica's own tasks. */
  #storeAway = false;
  #quietUntil = 0;
  #lastProblemAt = Number.NEGATIVE_INFINITY;

  constructor(options: ClusterTasksOptions) {
    this.replicaId = options.replicaId;
    this.#queue = options.queue;
    this.#tasks = options.tasks;
    this.#lifecycle = options.lifecycle;
    this.#logger = options.logger;
    this.#retainMs = options.retainMs;
    this.#address = options.address;
    this.#ownerTtlMs = options.ownerTtlMs ?? 15_000;
    this.#clock = options.clock ?? systemClock;
    this.#owners = new OwnerLeases({
      ...{ tasks: this.#tasks, ownerTtlMs: this.#ownerTtlMs, clock: this.#clock, logger: this.#logger },
      track: (p) => void this.#settle('*', p),
    });
    this.#heads = new ModelHeads(this.replicaId, options.blockMs ?? 250, this.#clock);
    this.#ends = new ClusterEndWriter({
      ...{
        tasks: this.#tasks,
        lifecycle: this.#lifecycle,
        replicaId: this.replicaId,
        ownerTtlMs: this.#ownerTtlMs,
        retainMs: this.#retainMs,
        logger: this.#logger,
      },
      storeProblem: (err, what) => this.storeProblem(err, what),
    });
    this.#takeover = {
      ...{ tasks: this.#tasks, logger: this.#logger, retainMs: this.#retainMs, address: this.#address },
      ...{
        lifecycle: this.#lifecycle,
        replicaId: this.replicaId,
        ownerTtlMs: this.#ownerTtlMs,
        scan: ORPHAN_SCAN,
        slots: options.slots,
      },
      hold: (id, life, fence) => this.#owners.hold(id, life, fence),
      // Granted back to this replica that let it go (the store was out for a whole lease) and still runs it: its end is written as any other.
      takeBack: (id, fence) => {
        if (!this.#owners.takeBack(id, fence)) return false;
        this.#logger.info(
          { task_id: id, human: `Task ${id} is this replica's again: nobody else took it over` },
          'task taken back',
        );
        return true;
      },
    };
    this.#unsubscribe = options.signals.subscribe((signal) => {
      if (signal.kind === 'queue' && this.#heads.heard(signal.group, signal.head, signal.headPayload))
        options.changed();
    });
    this.#ownKeeper = options.keeper === undefined ? new LeaseKeeper({ periodMs: this.#ownerTtlMs / 4 }) : undefined;
    // The end writer's retries ride on the same tick as the renewals.
    this.#stopRenewing = (options.keeper ?? this.#ownKeeper)!.keep({
      renewHeld: () => {
        this.#settle('*', this.#ends.retry());
        this.#owners.renewHeld();
      },
    });
  }

  /**
   * Admits the task to the cluster in one step (one round trip): its shared record (this replica
   * the owner), its queue entry and its session's started turn; `exists` for a task id taken
   * anywhere; `spent` (the session's budget), `late` (more than `maxAhead` of its model ahead) and
   * `full` write nothing. Every answer but `exists` carries what the store read (`view`). A `queued`
   * task is this replica's under the answer's fence once its record is made ({@link hold}).
   */
  async add(task: ClusterAdmission, maxAhead: number | undefined): Promise<AdmitOutcome> {
    const r = task.request;
    const record: SharedTaskRecord = {
      ...{
        model_ref: r.model_ref,
        priority: r.priority,
        session_id: r.session_id,
        admitted_at: task.admittedAt,
        owner_url: this.#address(),
      },
      ...{
        request: r,
        model_name: task.modelName,
        correlation_id: task.correlationId,
        client_key: task.clientKey,
        delivery: task.delivery,
        door: task.door,
        traceparent: task.trace?.traceparent(),
      },
    };
    const admitted = await this.#lifecycle.admit({
      task: {
        id: r.task_id,
        owner: this.replicaId,
        record: JSON.stringify(record),
        ttlMs: this.#ownerTtlMs,
        lifetimeMs: r.deadline_ms + this.#retainMs,
      },
      entry: { lane: r.priority, group: r.model_ref, payload: this.replicaId, deadlineMs: r.deadline_ms },
      sessionId: r.session_id,
      maxAhead,
    });
    // First of its model: no signal says so (an empty queue is news to nobody); an old head must not hold it.
    if (admitted.kind === 'queued' && admitted.view.ahead === 0) this.unblock(r.model_ref, r.task_id);
    return admitted;
  }

  /** The task is this replica's under `fence` (admitted here: its lease is renewed from now on). */
  hold(task: TaskRecord, fence: number): void {
    this.#owners.hold(task.id, task.life, fence);
  }

  /** How long ago this replica let the task go, ms; undefined when it holds it (or never did). */
  lostFor(id: string): number | undefined {
    return this.#owners.lostFor(id);
  }

  /** The owner lease of a task, ms. */
  get leaseMs(): number {
    return this.#ownerTtlMs;
  }

  /** Whether the model's tasks here wait for another replica's first task ({@link ModelHeads}). */
  blocked(group: string): boolean {
    return this.#heads.blocked(group);
  }

  /** The model's first task (`first`) is this replica's own after all: no need to wait for the queue to move. */
  unblock(group: string, first: string): void {
    this.#heads.unblock(group, first);
  }

  /**
   * Takes the task out of the cluster's queue if it is first of its model, or `room` lets it pass
   * (`DispatchRoom`), and moves its shared record to `running` (`placement`) under this replica's
   * fence, in one step; `behind` blocks the model here; `refused` (`fenced`, `state`) when this
   * replica may not dispatch it (nothing changed).
   * `frameBase`: the id the attempt's first token frame gets (no frame comes between a dispatch and
   * its first token with a Redis store), so a replica that takes the task over numbers its tokens
   * as this one did.
   */
  async takeAndDispatch(
    task: TaskRecord,
    placement: TaskPlacement,
    frameBase: number,
    room?: DispatchRoom,
  ): Promise<TakeDispatchOutcome> {
    const shared: SharedPlacement = { ...placement, frame_base: frameBase };
    const r = await this.#lifecycle.dispatch(task.id, task.life.fence, JSON.stringify(shared), room);
    this.#heads.took(task.request.model_ref, r.kind, r.kind === 'behind' ? r.first : undefined);
    return r;
  }

  /** Whether the task's id is admitted already with this very request (a client's or a balancer's retry of its POST). */
  async admittedAlready(task: Pick<TaskRecord, 'id' | 'request'>): Promise<boolean> {
    const stored = await this.#tasks.get(task.id);
    if (stored === undefined) return false;
    const request = (JSON.parse(stored.record) as Partial<SharedTaskRecord>).request;
    return request !== undefined && JSON.stringify(request) === JSON.stringify(task.request);
  }

  /** Who owns task `id` and where it listens; undefined for a task the store does not know (or whose owner has no address). */
  async ownerOf(id: string): Promise<TaskOwner | undefined> {
    const stored = await this.#tasks.get(id);
    if (stored === undefined) return undefined;
    const record = JSON.parse(stored.record) as Partial<SharedTaskRecord>;
    const address = record.owner_url;
    if (typeof address !== 'string') return undefined;
    const outcome =
      stored.state === 'ended' && stored.outcome !== undefined
        ? (JSON.parse(stored.outcome) as StoredOutcome)
        : undefined;
    const clientKey = typeof record.client_key === 'string' ? record.client_key : undefined;
    return { replica: stored.owner, fence: stored.fence, address, ended: stored.state === 'ended', outcome, clientKey };
  }

  /** Why the task's queue entry is gone (evicted by drop-lru, or lost). */
  async whyGone(id: string): Promise<GoneEntry> {
    return (await this.#queue.gone([id]))[0] ?? { id, evicted: false };
  }

  /** Of this replica's queued tasks, those that left the cluster's queue without it. */
  gone(ids: readonly string[]): Promise<GoneEntry[]> {
    return this.#queue.gone(ids);
  }

  /** How long a dropped dispatch stream keeps generating for a replica to re-attach (`reattach_ms`): past a takeover. */
  get reattachMs(): number {
    return 3 * this.#ownerTtlMs;
  }

  /** How often to look for orphans ({@link adoptOrphans}), ms: every {@link ADOPT_EVERY_MS} (one ZRANGEBYSCORE), or a quarter of a shorter lease (tests). */
  get adoptEveryMs(): number {
    return Math.max(50, Math.min(ADOPT_EVERY_MS, Math.floor(this.#ownerTtlMs / 4)));
  }

  /**
   * An attempt failed before its first token: the record back to `queued` and the entry at the head
   * of its lane, in one step under this replica's fence — refused (a task this replica lost), nothing
   * is put back: an entry with nobody to take it would lead its lane and hold every task of the
   * model behind it.
   */
  async requeue(task: TaskRecord, now: number): Promise<void> {
    const r = task.request;
    const entry = {
      lane: r.priority,
      group: r.model_ref,
      payload: this.replicaId,
      deadlineMs: Math.max(1, task.deadlineAt - now),
    };
    const moved = await this.#lifecycle.requeue({ id: task.id, fence: task.life.fence, entry });
    if (!moved.ok) throw new Error(`the shared record refused the requeue (${moved.reason})`);
  }

  /** The task is another replica's (handed off, shared/handoff.ts): that one ends it, this one writes nothing. */
  forget(id: string): void {
    this.#owners.forget(id);
  }

  /** The task left this replica's queue before a dispatch (cancel, deadline, shutdown): out of the cluster's too. */
  dequeue(id: string): void {
    if (this.#owners.isLost(id)) return;
    this.#settle(id, this.#queue.remove(id));
  }

  /** A task admitted to the cluster that this replica cannot keep after all (it closes): out of the queue, its record ended, its session's turn closed. */
  withdraw(task: TaskRecord, message: string): void {
    const frame: SseFrame = { event: 'error', data: { code: 'INTERNAL', message, retriable: true } };
    this.#settle(task.id, this.#end(task, frame, undefined, true));
  }

  /**
   * The task ended here, in one store step: its terminal frame becomes the shared record's outcome,
   * its entry leaves the cluster's queue when it was still `queued`, and its session counts the turn
   * (`served`: the pool whose cache now holds its prompt). Then `deliver` sends the frame to the
   * task's clients, once the record holds it ({@link deliverWhenWritten}): a client that saw the end
   * finds it in the record, even through another replica after this one died (spec 65, Ending).
   * Never throws.
   */
  ended(
    task: TaskRecord,
    frame: SseFrame,
    served: SessionPoolRef | undefined,
    queued: boolean,
    deliver: () => void,
  ): void {
    deliverWhenWritten(
      this.#settle(task.id, this.#end(task, frame, task.stream.reserveEnd(), queued, served)),
      deliver,
    );
  }

  /**
   * Tasks whose owner stopped renewing them (a replica that died or lost the store): the first
   * replica to find one (`lapsed`, at most {@link ORPHAN_SCAN} a pass) takes it over — `acquire`
   * grants it to exactly one, with a new fence and this replica's address in the record, so reads
   * and resumes are passed here. The task service then dispatches a queued one (its queue entry
   * keeps its place) or re-attaches to a running `/v2` one; one that cannot be carried on ends
   * (shared/takeover.ts).
   */
  async adoptOrphans(): Promise<Adoption[]> {
    const adopted: Adoption[] = [];
    const lapsed = await this.#tasks.lapsed(ORPHAN_SCAN).catch((err: unknown) => {
      this.#storeAway = true;
      throw err;
    });
    // Back from a store outage: every lease lapsed meanwhile, most owners alive, their clients
    // still connected to them. For one lease this replica only takes back its own tasks, so each
    // owner writes the end its client saw (taking a live owner's task would end it twice).
    if (this.#storeAway) this.#quietUntil = this.#clock.now() + this.#ownerTtlMs;
    this.#storeAway = false;
    const quiet = this.#clock.now() < this.#quietUntil;
    for (const id of lapsed) {
      // Ended here, its end not written yet: that end takes the task back itself (ClusterEndWriter).
      if (this.#ends.waiting(id) || (quiet && !this.#owners.isLost(id))) continue;
      const a = await takeOver(this.#takeover, id, 'lapsed', (record) =>
        this.#tasks.acquire(id, this.replicaId, this.#ownerTtlMs, record),
      );
      if (a !== undefined) adopted.push(a);
    }
    return adopted;
  }

  /** Takes task `id` over now on evidence that `from` died, its queued tasks first ({@link seizeFrom}); true when task `id` was. */
  async seize(id: string, from: TaskOwner): Promise<boolean> {
    const { adopted, found } = await seizeFrom(this.#takeover, id, from);
    for (const a of adopted) for (const l of this.#seizedListeners) l(a);
    return found;
  }

  /** Tasks taken over by {@link seize}. Returns the unsubscribe function. */
  onSeized(listener: (a: Adoption) => void): () => void {
    this.#seizedListeners.add(listener);
    return () => this.#seizedListeners.delete(listener);
  }

  /** A store call failed where nobody waits for it: logged at most once per 10 s. */
  storeProblem(err: unknown, what: string): void {
    const now = this.#clock.now();
    if (now - this.#lastProblemAt < 10_000) return;
    this.#lastProblemAt = now;
    this.#logger.warn({ err, human: `Cluster store unreachable while ${what}` }, 'cluster store call failed');
  }

  /** Stops renewing and listening; waits (bounded by the store's command timeout) for writes in flight. Idempotent. */
  async close(): Promise<void> {
    this.#stopRenewing();
    await this.#ownKeeper?.close();
    this.#unsubscribe();
    await Promise.all([...this.#pending]);
    this.#ends.close();
  }

  /**
   * Record, queue entry and session turn in one step; a task admitted here is ended once (its fence
   * is dropped). `frameId`: the frame's id in the task's log (undefined: the log never gets it).
   */
  async #end(
    task: TaskRecord,
    frame: SseFrame,
    frameId: number | undefined,
    queued: boolean,
    served?: SessionPoolRef,
  ): Promise<void> {
    const id = task.id;
    // Let go (another replica took it over, or the store was out for a whole lease): the end takes
    // it back first, and writes nothing when another replica has it.
    // No fence (0): not admitted here, or ended already — the record is not this replica's to end
    // (fence 0 is refused), but the entry and the session turn are closed all the same.
    const { fence, formerFence } = this.#owners.release(id);
    const tokensOut = frame.event === 'end' ? frame.data.tokens_out : undefined;
    await this.#ends.write({
      task,
      outcome: storedOutcome(task, frame, frameId),
      served,
      tokensOut,
      fence,
      formerFence,
      queued,
      sessionOpen: true,
    });
  }

  /** A store write nobody has to wait for: logged when it fails, awaited by close(). Returns it, never rejecting. */
  #settle(id: string, p: Promise<unknown>): Promise<unknown> {
    const tracked = p.catch((err: unknown) =>
      this.#logger.warn({ err, task_id: id }, 'cluster store write failed for a task'),
    );
    this.#pending.add(tracked);
    void tracked.finally(() => this.#pending.delete(tracked));
    return tracked;
  }

  /** Tasks this replica held and lost: taken over by another replica, or past their lease with the store unreachable. Returns the unsubscribe function. */
  onLost(listener: (ids: readonly string[]) => void): () => void {
    return this.#owners.onLost(listener);
  }
}
