/**
 * Bounded two-lane admission queue. Pure data structure: no timers, no I/O.
 *
 * - Lanes: every `interactive` entry is dequeued before any `batch` entry; FIFO within a lane.
 * - O(1) enqueue, dequeue and removal by id (one doubly linked list per lane + an id map).
 * - When full, `reject` refuses the new entry; `drop-lru` evicts the oldest `batch` entry (the
 *   caller must notify it: nothing is dropped silently) and refuses only when no batch entry exists.
 * - `requeueFront` puts an already admitted entry back at the head of its lane (re-placement after
 *   an engine failure); it may exceed the capacity because the entry was admitted before.
 */

export type Lane = 'interactive' | 'batch';
export type QueuePolicy = 'reject' | 'drop-lru';

export interface QueueEntry<T> {
  readonly id: string;
  readonly lane: Lane;
  readonly item: T;
  /** Absolute time (clock ms) after which the entry expires; `Infinity` = never. */
  readonly deadlineAt: number;
}

interface Node<T> extends QueueEntry<T> {
  prev: Node<T> | undefined;
  next: Node<T> | undefined;
}

class Lane_<T> {
  head: Node<T> | undefined;
  tail: Node<T> | undefined;
  size = 0;

  pushBack(node: Node<T>): void {
    node.prev = this.tail;
    node.next = undefined;
    if (this.tail) this.tail.next = node;
    else this.head = node;
    this.tail = node;
    this.size += 1;
  }

  pushFront(node: Node<T>): void {
    node.next = this.head;
    node.prev = undefined;
    if (this.head) this.head.prev = node;
    else this.tail = node;
    this.head = node;
    this.size += 1;
  }

  unlink(node: Node<T>): void {
    if (node.prev) node.prev.next = node.next;
    else this.head = node.next;
    if (node.next) node.next.prev = node.prev;
    else this.tail = node.prev;
    node.prev = undefined;
    node.next = undefined;
    this.size -= 1;
  }
}

export type EnqueueResult<T> =
  | { readonly kind: 'queued'; readonly position: number; readonly evicted?: QueueEntry<T> }
  | { readonly kind: 'full'; readonly policy: QueuePolicy };

export interface AdmissionQueueOptions<T> {
  /** Maximum queued entries. */
  capacity: number;
  /** Behaviour when full. */
  policy: QueuePolicy;
  /** Group of an item (the task service groups by model), counted per lane for {@link AdmissionQueue.countAhead}. */
  groupOf?: (item: T) => string;
}

export class AdmissionQueue<T> {
  readonly capacity: number;
  readonly policy: QueuePolicy;
  readonly #lanes: Record<Lane, Lane_<T>> = { interactive: new Lane_<T>(), batch: new Lane_<T>() };
  readonly #byId = new Map<string, Node<T>>();
  readonly #groupOf: ((item: T) => string) | undefined;
  readonly #groups = new Map<string, Record<Lane, number>>();

  constructor(options: AdmissionQueueOptions<T>) {
    if (!Number.isInteger(options.capacity) || options.capacity < 1)
      throw new RangeError('capacity must be an integer >= 1');
    this.capacity = options.capacity;
    this.policy = options.policy;
    this.#groupOf = options.groupOf;
  }

  /**
   * Entries of `group` that a new entry in `lane` would wait behind: the group's interactive
   * entries, plus its batch entries for a batch entry. O(1): admission asks on every request.
   */
  countAhead(group: string, lane: Lane): number {
    const c = this.#groups.get(group);
    if (c === undefined) return 0;
    return lane === 'interactive' ? c.interactive : c.interactive + c.batch;
  }

  get size(): number {
    return this.#byId.size;
  }

  sizeOf(lane: Lane): number {
    return this.#lanes[lane].size;
  }

  has(id: string): boolean {
    return this.#byId.has(id);
  }

  get(id: string): QueueEntry<T> | undefined {
    return this.#byId.get(id);
  }

  /** Adds an entry at the tail of its lane, applying the policy when the queue is full. */
  enqueue(id: string, lane: Lane, item: T, deadlineAt = Number.POSITIVE_INFINITY): EnqueueResult<T> {
    if (this.#byId.has(id)) throw new Error(`duplicate queue id ${id}`);
    let evicted: QueueEntry<T> | undefined;
    if (this.size >= this.capacity) {
      if (this.policy === 'reject') return { kind: 'full', policy: 'reject' };
      const victim = this.#lanes.batch.head;
      if (victim === undefined) return { kind: 'full', policy: 'drop-lru' };
      this.#unlink(victim);
      evicted = toEntry(victim);
    }
    const node: Node<T> = { id, lane, item, deadlineAt, prev: undefined, next: undefined };
    this.#lanes[lane].pushBack(node);
    this.#link(node);
    const position = lane === 'interactive' ? this.#lanes.interactive.size - 1 : this.size - 1;
    return evicted ? { kind: 'queued', position, evicted } : { kind: 'queued', position };
  }

  /** Puts an admitted entry back at the head of its lane (ignores capacity). */
  requeueFront(id: string, lane: Lane, item: T, deadlineAt = Number.POSITIVE_INFINITY): void {
    if (this.#byId.has(id)) throw new Error(`duplicate queue id ${id}`);
    const node: Node<T> = { id, lane, item, deadlineAt, prev: undefined, next: undefined };
    this.#lanes[lane].pushFront(node);
    this.#link(node);
  }

  /**
   * Puts an admitted entry back among the entries of its lane by `rank` (ascending; after those of
   * equal rank), ignoring capacity: a task that went out to be claimed and came back takes its
   * place in the order again, instead of the head. O(lane).
   */
  reinsert(id: string, lane: Lane, item: T, deadlineAt: number, rank: (item: T) => number): void {
    if (this.#byId.has(id)) throw new Error(`duplicate queue id ${id}`);
    const node: Node<T> = { id, lane, item, deadlineAt, prev: undefined, next: undefined };
    const list = this.#lanes[lane];
    const r = rank(item);
    let after = list.tail;
    while (after !== undefined && rank(after.item) > r) after = after.prev;
    if (after === undefined) list.pushFront(node);
    else if (after === list.tail) list.pushBack(node);
    else {
      const next = after.next as Node<T>;
      node.prev = after;
      node.next = next;
      after.next = node;
      next.prev = node;
      list.size += 1;
    }
    this.#link(node);
  }

  /** Removes and returns the next entry in dispatch order. */
  dequeue(): QueueEntry<T> | undefined {
    const node = this.#lanes.interactive.head ?? this.#lanes.batch.head;
    if (node === undefined) return undefined;
    this.#unlink(node);
    return toEntry(node);
  }

  /** Removes an entry by id, O(1). */
  remove(id: string): QueueEntry<T> | undefined {
    const node = this.#byId.get(id);
    if (node === undefined) return undefined;
    this.#unlink(node);
    return toEntry(node);
  }

  /**
   * First entry in dispatch order that satisfies `predicate`, without removing it: the scheduler
   * takes the highest-priority task that is eligible for a free pool, so a task whose model no
   * free pool serves does not block tasks behind it.
   */
  find(predicate: (entry: QueueEntry<T>) => boolean): QueueEntry<T> | undefined {
    for (const entry of this) if (predicate(entry)) return entry;
    return undefined;
  }

  /** Removes and returns every entry whose deadline is at or before `now`, in dispatch order. */
  takeExpired(now: number): QueueEntry<T>[] {
    const out: QueueEntry<T>[] = [];
    for (const entry of this) if (entry.deadlineAt <= now) out.push(entry);
    for (const entry of out) this.remove(entry.id);
    return out;
  }

  /** 0-based position in dispatch order (O(n)); undefined when absent. */
  positionOf(id: string): number | undefined {
    let i = 0;
    for (const entry of this) {
      if (entry.id === id) return i;
      i += 1;
    }
    return undefined;
  }

  /** Entries in dispatch order: interactive lane, then batch lane. Safe against removal of the current entry. */
  *[Symbol.iterator](): IterableIterator<QueueEntry<T>> {
    for (const lane of [this.#lanes.interactive, this.#lanes.batch]) {
      let node = lane.head;
      while (node !== undefined) {
        const next = node.next;
        yield node;
        node = next;
      }
    }
  }

  /** Removes everything (used on close), returning the entries in dispatch order. */
  drain(): QueueEntry<T>[] {
    const all = [...this];
    for (const entry of all) this.remove(entry.id);
    return all;
  }

  #link(node: Node<T>): void {
    this.#byId.set(node.id, node);
    if (this.#groupOf === undefined) return;
    const group = this.#groupOf(node.item);
    const c = this.#groups.get(group);
    if (c === undefined)
      this.#groups.set(group, {
        interactive: node.lane === 'interactive' ? 1 : 0,
        batch: node.lane === 'batch' ? 1 : 0,
      });
    else c[node.lane] += 1;
  }

  #unlink(node: Node<T>): void {
    this.#lanes[node.lane].unlink(node);
    this.#byId.delete(node.id);
    if (this.#groupOf === undefined) return;
    const group = this.#groupOf(node.item);
    const c = this.#groups.get(group);
    if (c === undefined) return;
    c[node.lane] -= 1;
    if (c.interactive === 0 && c.batch === 0) this.#groups.delete(group);
  }
}

function toEntry<T>(node: Node<T>): QueueEntry<T> {
  return { id: node.id, lane: node.lane, item: node.item, deadlineAt: node.deadlineAt };
}
