import type { ErrorCode } from '@llama-orch/contracts';
import { candidateKey, type Lease, type PoolView } from '../../registry/pool-view.js';
import type { ClusterSlotLeases } from '../../registry/cluster-slot-leases.js';
import type { WaitingLine } from '../../scheduling/scheduler.js';
import type { PlacementReason } from '../../scheduling/placement.js';
import type { AdmissionQueue } from '../../admission/admission-queue.js';
import type { GoneEntry } from '../../store/admission-queue-store.js';
import type { Adoption, ClusterTasks, TaskOwner } from './cluster-tasks.js';
import { followsMoves, unlessMoved } from './handoff.js';
import { placementOf, type TaskRecord } from '../task-record.js';

/** What the gate does to the task service's tasks. */
export interface GateActions {
  /** The task may go: dispatch it to `view` on `lease`, under the cluster slot lease `clusterLease` (given back when the attempt ends). */
  dispatch(
    task: TaskRecord,
    view: PoolView,
    lease: Lease,
    reason: PlacementReason,
    clusterLease: string | undefined,
  ): void;
  fail(task: TaskRecord, code: ErrorCode, message: string, retriable: boolean): void;
  /** The local queue changed while nothing else would pump. */
  pump(): void;
  /** A task of a replica that died is this replica's now: queue or re-attach it. */
  adopt(a: Adoption): void;
  /** The queued task is replica `to`'s now (it took it over while this one stalled): its readers follow it there, nothing ends here (shared/handoff.ts). */
  handOff(task: TaskRecord, to: string): void;
}

/** The cluster slot lease a claim holds while it is under way. */
interface ClusterSlot {
  leaseId?: string | undefined;
}

const LOST =
  'this replica lost the task to another (cluster store unreachable, or its lease lapsed); resubmit the task';

/**
 * How long a let-go queued task waits to be granted back, in owner leases: long enough for a store
 * that restarts to answer again and the sweep to find the lease lapsed; short enough that the
 * client of a replica cut off from the store gets its (retriable) error soon.
 */
const TAKE_BACK_LEASES = 1;

/** How often a replica checks that its queued tasks are still in the cluster's queue, ms. */
const RECONCILE_MS = 1000;

/**
 * Between the local scheduler and a dispatch, with a Redis store: a task the scheduler gave a slot
 * goes only when the cluster's queue lets it (`take`: first of its model on every replica) and its
 * shared record moves to `running` under this replica's fence. Otherwise it goes back to the head
 * of the local queue (behind: its model waits here until the cluster's queue moves), or ends
 * (evicted by another replica's admission, lost with the store's data, or the store unreachable).
 * The local queue the scheduler reads hides blocked models ({@link gatedLine}).
 */
export class ClusterGate {
  readonly #cluster: ClusterTasks;
  readonly #queue: AdmissionQueue<TaskRecord>;
  readonly #act: GateActions;
  readonly #leases: ClusterSlotLeases | undefined;
  #adopting = false;
  #lastReconcile = 0;
  #lastAdopt = 0;
  /**
   * Tasks whose claim is under way (out of the local queue; each one's lifecycle says so), counted
   * in the queue depth, with a token per claim: a claim that put its task back in line is over
   * then, and may settle after the next claim of the same task began.
   */
  readonly #claiming = new Map<TaskRecord, symbol>();

  constructor(
    cluster: ClusterTasks,
    queue: AdmissionQueue<TaskRecord>,
    actions: GateActions,
    leases?: ClusterSlotLeases,
  ) {
    this.#cluster = cluster;
    this.#queue = queue;
    this.#act = actions;
    this.#leases = leases;
    // A queued task this replica let go stays in the local queue, out of the scheduler's sight
    // (gatedLine), until the orphan sweep grants it back (nobody else took it: a store outage) or it
    // turns out another replica has it: then a `/v2` client follows it there, any other gets a
    // typed, retriable end rather than waiting for a dispatch that will not come from here.
    cluster.onLost((ids) => {
      for (const id of ids) {
        // One being claimed: its claim finds it let go (its lifecycle says so) when the store answers.
        const task = this.#queue.get(id)?.item;
        if (task !== undefined && task.state === 'queued') void this.#followIfMoved(task);
      }
      this.#act.pump();
    });
    // Taken over on evidence that its replica died (a read or cancel found its address refusing):
    // this replica's now, as an orphan found by the sweep would be.
    cluster.onSeized((a) => {
      this.#act.adopt(a);
      this.#act.pump();
    });
  }

  /** The scheduler leased `lease` of `view` for the task and took it out of the local queue. */
  assigned(task: TaskRecord, view: PoolView, lease: Lease, reason: PlacementReason): void {
    const slot: ClusterSlot = {};
    const claim = Symbol('claim');
    task.life.claim();
    this.#claiming.set(task, claim);
    void this.#claim(task, view, lease, reason, slot)
      .catch((err: unknown) => {
        this.#giveBack(slot);
        lease.release();
        if (task.state !== 'queued') return;
        // A call in flight while this replica stalled times out as it runs again (its timer is overdue
        // before the answer is read): another replica may have taken the task over meanwhile.
        this.#refused(
          task,
          'STORE_UNAVAILABLE',
          `cluster store unreachable: ${err instanceof Error ? err.message : String(err)}`,
        );
      })
      .finally(() => {
        if (this.#claiming.get(task) === claim) this.#claimOver(task);
      });
  }

  /**
   * Tasks out of the local queue while their claim (the slot lease, then the take) is in flight:
   * still waiting in the cluster's queue, so they count in this replica's queue depth.
   */
  claiming(): Record<'interactive' | 'batch', number> {
    const depth = { interactive: 0, batch: 0 };
    for (const task of this.#claiming.keys()) depth[task.request.priority] += 1;
    return depth;
  }

  /**
   * The cluster slot lease first, then the cluster's queue: a task leaves the cluster's queue only
   * with a slot to go to. Taken the other way round, a task that found every slot leased was out of
   * the queue until it was put back, and meanwhile another replica's admissions counted positions
   * without it and a freed slot went to the task behind it (the priority-order test, under load).
   */
  async #claim(
    task: TaskRecord,
    view: PoolView,
    lease: Lease,
    reason: PlacementReason,
    slot: ClusterSlot,
  ): Promise<void> {
    if (this.#leases !== undefined) {
      slot.leaseId = await this.#leases.acquire(candidateKey(view), view.slots_total, task.id);
      if (task.state !== 'queued') {
        this.#giveBack(slot);
        return lease.release();
      }
      if (slot.leaseId === undefined) {
        // Every slot is leased across the cluster: the lease signals will give this replica's view
        // of the pool the slots the others hold; the task waits here, still in the cluster's queue.
        lease.release();
        this.#backInLine(task);
        if (task.life.lost) void this.#followIfMoved(task);
        this.#act.pump();
        return;
      }
    }
    // One round trip: out of the cluster's queue and `running` on the shared record, or neither.
    // Holding a cluster slot lease, the task may pass tasks ahead of it that the pool has room for too.
    const room = slot.leaseId === undefined ? undefined : { poolKey: candidateKey(view), slots: view.slots_total };
    const taken = await this.#cluster.takeAndDispatch(task, placementOf(view), task.stream.length, room);
    if (taken.kind !== 'taken' || task.state !== 'queued') this.#giveBack(slot);
    if (task.state !== 'queued') return lease.release();
    if (taken.kind === 'behind') {
      lease.release();
      // Back in admission order (a head insert would reverse several tasks sent back in one pass).
      this.#backInLine(task);
      if (task.life.lost) return void this.#followIfMoved(task);
      const first = this.#queue.get(taken.first);
      if (first !== undefined) {
        // The task ahead is this replica's own: it goes now, nobody else would take it.
        this.#cluster.unblock(task.request.model_ref, first.id);
        this.#queue.remove(first.id);
        this.#queue.requeueFront(first.id, first.lane, first.item, first.deadlineAt);
        this.#act.pump();
      }
      return;
    }
    if (taken.kind === 'absent') {
      lease.release();
      const gone = await this.#cluster.whyGone(task.id);
      if (task.state === 'queued') this.#lost(task, gone.evicted);
      return;
    }
    if (taken.kind === 'refused') {
      lease.release();
      // Let go while its take was on its way: it waits for the sweep to grant it back, or follows its new owner.
      if (task.life.lost) {
        this.#backInLine(task);
        return void this.#followIfMoved(task);
      }
      this.#refused(
        task,
        'INTERNAL',
        `this replica may no longer dispatch the task (shared record: ${taken.refusal.reason})`,
      );
      return;
    }
    this.#act.dispatch(task, view, lease, reason, slot.leaseId);
  }

  #giveBack(slot: ClusterSlot): void {
    if (slot.leaseId !== undefined) this.#leases?.release(slot.leaseId);
    slot.leaseId = undefined;
  }

  /** The task service's housekeeping tick: {@link reconcile} every {@link RECONCILE_MS}, {@link adoptOrphans} every `adoptEveryMs` (100 ms). */
  tick(now: number): void {
    if (now - this.#lastReconcile >= RECONCILE_MS) {
      this.#lastReconcile = now;
      void this.reconcile();
    }
    if (now - this.#lastAdopt >= this.#cluster.adoptEveryMs) {
      this.#lastAdopt = now;
      void this.adoptOrphans();
    }
  }

  /**
   * Every second or so: this replica's queued tasks that left the cluster's queue without it end,
   * and the let-go ones still waiting here look again whether another replica took them. Never rejects.
   */
  async reconcile(): Promise<void> {
    const queued: string[] = [];
    for (const e of this.#queue) {
      if (!e.item.life.lost) queued.push(e.id);
      else if (e.item.state === 'queued') void this.#followIfMoved(e.item);
    }
    if (queued.length === 0) return;
    let gone: GoneEntry[];
    try {
      gone = await this.#cluster.gone(queued);
    } catch (err) {
      this.#cluster.storeProblem(err, 'checking the queued tasks');
      return;
    }
    for (const g of gone) {
      const entry = this.#queue.remove(g.id);
      if (entry !== undefined && entry.item.state === 'queued') this.#lost(entry.item, g.evicted);
    }
    this.#act.pump();
  }

  /** Every 100 ms: the tasks of replicas that stopped renewing become this one's (ClusterTasks.adoptOrphans). Never rejects; one pass at a time. */
  async adoptOrphans(): Promise<void> {
    if (this.#adopting) return;
    this.#adopting = true;
    try {
      const adopted = await this.#cluster.adoptOrphans();
      for (const a of adopted) this.#act.adopt(a);
      if (adopted.length > 0) this.#act.pump();
    } catch (err) {
      this.#cluster.storeProblem(err, 'taking over orphaned tasks');
    } finally {
      this.#adopting = false;
    }
  }

  #lost(task: TaskRecord, evicted: boolean): void {
    if (evicted)
      this.#act.fail(
        task,
        'QUEUE_FULL_DROP_LRU',
        'evicted from the full admission queue by a newer task (policy drop-lru)',
        true,
      );
    else
      this.#refused(
        task,
        'INTERNAL',
        "the task's entry is gone from the cluster's queue (the store lost its data?); resubmit the task",
      );
  }

  /**
   * A queued task this replica let go (in the local queue, hidden from the scheduler): when another
   * replica owns it now, it leaves the queue and a `/v2` task is handed off there (its client
   * reconnects there), any other ends STORE_UNAVAILABLE (retriable: its client is here and cannot
   * follow); still this replica's, or the store unreachable, it stays, for the orphan sweep to grant
   * it back once its lease lapsed (ClusterTasks' `takeBack`), when it is dispatched as if nothing
   * happened — but for one more lease at most ({@link TAKE_BACK_LEASES}): a replica cut off from
   * the store cannot tell that another took the task and ran it, and its client must not wait for
   * nothing. Past that it ends STORE_UNAVAILABLE (retriable), as a task let go always did.
   */
  async #followIfMoved(task: TaskRecord): Promise<void> {
    let owner: TaskOwner | undefined;
    let unreachable = false;
    try {
      owner = await this.#cluster.ownerOf(task.id);
    } catch {
      unreachable = true;
    }
    // ended, or granted back, meanwhile
    if (task.state !== 'queued' || !task.life.lost) return;
    if (unreachable || (owner !== undefined && owner.replica === this.#cluster.replicaId)) {
      if ((this.#cluster.lostFor(task.id) ?? 0) <= TAKE_BACK_LEASES * this.#cluster.leaseMs) return;
      this.#queue.remove(task.id);
      this.#act.fail(task, 'STORE_UNAVAILABLE', LOST, true);
      return;
    }
    this.#queue.remove(task.id);
    if (owner === undefined)
      this.#act.fail(
        task,
        'INTERNAL',
        "the task's record is gone from the cluster store (the store lost its data?); resubmit the task",
        true,
      );
    else if (followsMoves(task)) this.#act.handOff(task, owner.replica);
    else this.#act.fail(task, 'STORE_UNAVAILABLE', LOST, true);
  }

  /** The claim is over: the task waits in the local line again (in admission order), to be claimed anew. */
  #backInLine(task: TaskRecord): void {
    this.#claimOver(task);
    this.#queue.reinsert(task.id, task.request.priority, task, task.deadlineAt, (t) => t.admittedAt);
  }

  #claimOver(task: TaskRecord): void {
    task.life.claimed();
    this.#claiming.delete(task);
  }

  /**
   * The store refused the queued task (out of the local queue) to this replica: let go, fenced, its
   * entry gone, or a call about it failed. Another replica that found this one's lease lapsed (a
   * stall: a loaded machine, a GC pause) may have taken it over and dispatch it, so a `/v2` task is
   * handed off when the store names another owner: its client reconnects there and gets the task's
   * tokens and end, not this error for a task that completes elsewhere. Still this replica's,
   * unknown, the store unreachable, or a client that cannot follow (`/v1`): it ends here with the
   * error (retriable).
   */
  #refused(task: TaskRecord, code: ErrorCode, message: string): void {
    const fail = (): void => this.#act.fail(task, code, message, true);
    if (!followsMoves(task)) return fail();
    void unlessMoved(task, this.#cluster, fail, (to) => this.#act.handOff(task, to));
  }
}

/** The local queue as the scheduler sees it with a Redis store: the tasks of models blocked by the cluster's order are skipped. */
export function gatedLine(queue: AdmissionQueue<TaskRecord>, cluster: ClusterTasks): WaitingLine<TaskRecord> {
  return {
    get size() {
      return queue.size;
    },
    remove: (id: string) => queue.remove(id),
    *[Symbol.iterator]() {
      // blocked models wait for the cluster's queue to move; a let-go task for the sweep to grant it back
      for (const entry of queue)
        if (!cluster.blocked(entry.item.request.model_ref) && !entry.item.life.lost) yield entry;
    },
  };
}
