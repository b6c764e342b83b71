import type { Clock } from '@llama-orch/daemon-support';
import type { ReferenceSignals } from './reference-signals.js';
import {
  EVICTED_KEPT_MS,
  type AdmissionQueueStore,
  type GoneEntry,
  type QueueAddOutcome,
  type QueueTakeOutcome,
  type QueueEntryInput,
  type QueueLane,
  type QueueOverflowPolicy,
  type QueueSizes,
  type QueuedEntry,
} from '../../store/admission-queue-store.js';

interface Node extends QueuedEntry {
  prev: Node | undefined;
  next: Node | undefined;
}

/** One lane: a doubly linked list in dispatch order (O(1) add, head, removal). */
class LaneList {
  head: Node | undefined;
  tail: Node | undefined;
  size = 0;

  pushBack(n: Node): void {
    n.prev = this.tail;
    n.next = undefined;
    if (this.tail) this.tail.next = n;
    else this.head = n;
    this.tail = n;
    this.size += 1;
  }

  pushFront(n: Node): void {
    n.next = this.head;
    n.prev = undefined;
    if (this.head) this.head.prev = n;
    else this.tail = n;
    this.head = n;
    this.size += 1;
  }

  unlink(n: Node): void {
    if (n.prev) n.prev.next = n.next;
    else this.head = n.next;
    if (n.next) n.next.prev = n.prev;
    else this.tail = n.prev;
    n.prev = undefined;
    n.next = undefined;
    this.size -= 1;
  }
}

const LANES: readonly QueueLane[] = ['interactive', 'batch'];

/** The admission queue in memory (the reference model of the Redis queue; the semantics of `admission/admission-queue.ts`). */
export class ReferenceQueue implements AdmissionQueueStore {
  readonly #lanes: Record<QueueLane, LaneList> = { interactive: new LaneList(), batch: new LaneList() };
  readonly #byId = new Map<string, Node>();
  readonly #groups = new Map<string, Record<QueueLane, number>>();
  readonly #clock: Clock;
  readonly #signals: ReferenceSignals | undefined;
  /** Ids `drop-lru` evicted → when that stops being reported (the Redis store keeps a marker as long). */
  readonly #evicted = new Map<string, number>();

  constructor(
    readonly capacity: number,
    readonly policy: QueueOverflowPolicy,
    clock: Clock,
    signals?: ReferenceSignals,
  ) {
    this.#clock = clock;
    this.#signals = signals;
  }

  /** Queues an entry at the back of its lane (capacity and policy), synchronously: the reference lifecycle composes it with the records and sessions in one step. */
  addNow(input: QueueEntryInput): QueueAddOutcome {
    if (this.#byId.has(input.id)) return { kind: 'duplicate' };
    let evicted: QueuedEntry | undefined;
    if (this.#byId.size >= this.capacity) {
      const victim = this.#lanes.batch.head;
      if (this.policy === 'reject' || victim === undefined) return { kind: 'full', policy: this.policy };
      this.#unlink(victim);
      evicted = entryOf(victim);
      this.#evicted.set(victim.id, this.#clock.now() + EVICTED_KEPT_MS);
    }
    const node = this.#node(input);
    this.#lanes[node.lane].pushBack(node);
    this.#link(node);
    const position = node.lane === 'interactive' ? this.#lanes.interactive.size - 1 : this.#byId.size - 1;
    return evicted === undefined ? { kind: 'queued', position } : { kind: 'queued', position, evicted };
  }

  /** Puts an admitted entry back at the head of its lane (ignores capacity), synchronously; false for a duplicate id. */
  requeueFrontNow(input: QueueEntryInput): boolean {
    if (this.#byId.has(input.id)) return false;
    const node = this.#node(input);
    this.#lanes[node.lane].pushFront(node);
    this.#link(node);
    return true;
  }

  /**
   * Whether the entry may leave now (the first of its group in dispatch order), without taking it;
   * `passes(ahead)`: whether an entry that is not first may go all the same, with `ahead` entries
   * of its group ahead of it (`DispatchRoom`).
   */
  canTake(id: string, passes?: (ahead: number) => boolean): QueueTakeOutcome {
    const n = this.#byId.get(id);
    if (n === undefined) return { kind: 'absent' };
    const first = this.#firstOf(n.group);
    if (first !== n && passes?.(this.#aheadOf(n)) !== true) return { kind: 'behind', first: (first as Node).id };
    return { kind: 'taken', entry: entryOf(n) };
  }

  gone(ids: readonly string[]): Promise<GoneEntry[]> {
    const now = this.#clock.now();
    for (const [id, until] of this.#evicted) if (until <= now) this.#evicted.delete(id);
    return Promise.resolve(
      ids.filter((id) => !this.#byId.has(id)).map((id) => ({ id, evicted: this.#evicted.has(id) })),
    );
  }

  /** The group's first entry in dispatch order (O(n): a test model, not a hot path). */
  #firstOf(group: string): Node | undefined {
    for (const lane of LANES) {
      if ((this.#groups.get(group)?.[lane] ?? 0) === 0) continue;
      for (let n = this.#lanes[lane].head; n !== undefined; n = n.next) if (n.group === group) return n;
    }
    return undefined;
  }

  /** The first `limit` entries of each lane, in dispatch order. */
  headsNow(limit: number): QueuedEntry[] {
    const out: QueuedEntry[] = [];
    for (const lane of LANES) {
      let n = this.#lanes[lane].head;
      for (let i = 0; i < limit && n !== undefined; i += 1, n = n.next) out.push(entryOf(n));
    }
    return out;
  }

  remove(id: string): Promise<QueuedEntry | undefined> {
    return Promise.resolve(this.removeNow(id));
  }

  removeNow(id: string): QueuedEntry | undefined {
    const n = this.#byId.get(id);
    if (n === undefined) return undefined;
    this.#unlink(n);
    return entryOf(n);
  }

  has(id: string): boolean {
    return this.#byId.has(id);
  }

  /** Entries of the node's group ahead of it in dispatch order. */
  #aheadOf(n: Node): number {
    let ahead = n.lane === 'batch' ? (this.#groups.get(n.group)?.interactive ?? 0) : 0;
    for (let m = n.prev; m !== undefined; m = m.prev) if (m.group === n.group) ahead += 1;
    return ahead;
  }

  /** Entries of `group` that a new entry in `lane` would wait behind. */
  countAheadNow(group: string, lane: QueueLane): number {
    const c = this.#groups.get(group);
    if (c === undefined) return 0;
    return lane === 'interactive' ? c.interactive : c.interactive + c.batch;
  }

  sizes(): Promise<QueueSizes> {
    return Promise.resolve({ interactive: this.#lanes.interactive.size, batch: this.#lanes.batch.size });
  }

  #node(input: QueueEntryInput): Node {
    const deadlineAt = input.deadlineMs === undefined ? Number.POSITIVE_INFINITY : this.#clock.now() + input.deadlineMs;
    return {
      id: input.id,
      lane: input.lane,
      group: input.group,
      payload: input.payload,
      deadlineAt,
      prev: undefined,
      next: undefined,
    };
  }

  #link(n: Node): void {
    this.#byId.set(n.id, n);
    const c = this.#groups.get(n.group);
    if (c === undefined)
      this.#groups.set(n.group, { interactive: n.lane === 'interactive' ? 1 : 0, batch: n.lane === 'batch' ? 1 : 0 });
    else c[n.lane] += 1;
    // The first entry of an empty group is news to nobody: every waiting task has an entry, so none waits on the group.
    if (c !== undefined && this.#isHead(n)) this.#signalHead(n.group);
  }

  /**
   * Whether a signal is wanted for `n` (signals on) and it is its group's first entry: only a change
   * of the first of a group that had or keeps other entries is signalled, as with Redis.
   */
  #isHead(n: Node): boolean {
    return this.#signals !== undefined && this.#firstOf(n.group) === n;
  }

  #signalHead(group: string): void {
    if (this.#signals === undefined) return;
    const head = this.#firstOf(group);
    this.#signals.emit({ kind: 'queue', group, head: head?.id, headPayload: head?.payload });
  }

  #unlink(n: Node): void {
    const wasHead = this.#isHead(n);
    this.#lanes[n.lane].unlink(n);
    this.#byId.delete(n.id);
    const c = this.#groups.get(n.group);
    if (c !== undefined) {
      c[n.lane] -= 1;
      if (c.interactive === 0 && c.batch === 0) this.#groups.delete(n.group);
    }
    if (wasHead && this.#groups.has(n.group)) this.#signalHead(n.group);
  }
}

function entryOf(n: Node): QueuedEntry {
  return { id: n.id, lane: n.lane, group: n.group, payload: n.payload, deadlineAt: n.deadlineAt };
}
