import type { ModelServe, PoolCapability } from '@llama-orch/contracts';
import type { Clock, Log } from '@llama-orch/daemon-support';
import { InsufficientMemoryError } from '../errors.js';
import type { CatalogModelEntry, CatalogStore } from '../store/catalog-store.js';
import { poolsOfEntry, swapVictim } from './eviction.js';
import { isCopy, poolKey, type Fleet } from './fleet.js';
import type { ModelLoads } from './model-loads.js';

/** A catalog model with tasks waiting for room on some node. */
interface Waiting {
  entry: CatalogModelEntry;
  /** When it started waiting, or when its last swap was asked: the bounded wait counts from here. */
  since: number;
  /** Past this nobody waits for it any more (the latest deadline of its waiting tasks). */
  until: number;
}

export interface RoomWaitsOptions {
  catalog: Pick<CatalogStore, 'list'>;
  fleet: Pick<Fleet, 'pools' | 'nodes'>;
  loads: Pick<ModelLoads, 'load' | 'unloadCopy'>;
  /** The latest deadline of the model's (by ref) tasks queued on this replica; undefined = none queued. */
  queuedUntil: (ref: string) => number | undefined;
  clock: Clock;
  logger: Log;
  /**
   * How long a model waits for room before a busy copy of another model is swapped out for it
   * (drained: its work in flight finishes, nothing new starts on it). Bounds every model's wait
   * and the swap rate: at most one swap per model per this period. @default 2000
   */
  swapWaitMs?: number;
  /** How long a swapped-out copy may finish its work in flight, ms. @default 60000 */
  swapDrainMs?: number;
  /** Retry period while models wait, ms (each try may ask a node, which refuses quickly). @default 500 */
  retryMs?: number;
}

export type RoomWaitsState = 'running' | 'closed';

/** How long a model whose copy went here still counts as one its requeued tasks wait for. */
const GONE_MEMORY_MS = 60_000;

/**
 * Models on demand when no node has room (spec 67, Waiting for room): instead of a refusal, the
 * task waits in the queue and its model here. Each retry tries the load again, which evicts idle copies first; a model that has waited `swapWaitMs` swaps out a busy
 * copy of a model of no higher priority (never a pinned or loading one): that copy drains, its work
 * in flight finishes, and its own waiting tasks wait here for it in turn. Tasks for loaded models
 * go first meanwhile (they are placed as usual); the waiting ones of a model are served together
 * once it is loaded.
 */
export class RoomWaits {
  readonly #o: RoomWaitsOptions;
  readonly #waiting = new Map<string, Waiting>();
  /** Models a copy of which this replica unloaded lately (evicted, swapped, idle), by ref. */
  readonly #gone = new Map<string, { entry: CatalogModelEntry; at: number }>();
  readonly #swapWaitMs: number;
  readonly #swapDrainMs: number;
  #timer: NodeJS.Timeout | undefined;
  #trying: Promise<void> | undefined;
  #again = false;
  #state: RoomWaitsState = 'running';

  constructor(options: RoomWaitsOptions) {
    this.#o = options;
    this.#swapWaitMs = options.swapWaitMs ?? 2000;
    this.#swapDrainMs = options.swapDrainMs ?? 60_000;
  }

  get state(): RoomWaitsState {
    return this.#state;
  }

  /** The model (by ref) waits for room: its tasks stay queued; what a copy of it will serve. */
  waitingFor(ref: string): CatalogModelEntry | undefined {
    return this.#waiting.get(ref)?.entry;
  }

  /** Tasks of `entry` wait for room until `until` (ms since the epoch; extended, never shortened). */
  wait(entry: CatalogModelEntry, until: number): void {
    if (this.#state !== 'running') return;
    const w = this.#waiting.get(entry.ref);
    if (w !== undefined) w.until = Math.max(w.until, until);
    else {
      this.#waiting.set(entry.ref, { entry, since: this.#o.clock.now(), until });
      this.#o.logger.info(
        { model: entry.id, human: `Model '${entry.id}' waits for room on a node; its tasks stay queued` },
        'model waits for room',
      );
    }
    this.#start();
  }

  /**
   * A copy of `entry` is going (swapped out, evicted): the tasks of it queued here, if any, wait for
   * room for it in turn instead of finding no pool once the copy is gone.
   */
  keepWaiting(entry: CatalogModelEntry): void {
    this.#gone.set(entry.ref, { entry, at: this.#o.clock.now() });
    const until = this.#o.queuedUntil(entry.ref);
    if (until !== undefined) this.wait(entry, until);
  }

  /**
   * The scheduler's question for a task whose model no pool lists: does it wait for room? Yes when
   * its model waits already, or a copy of it went here lately (`keepWaiting`): a task placed on
   * that copy as it went is put back in line and must wait for the model, not be refused.
   */
  waitsFor(ref: string): boolean {
    if (this.#waiting.has(ref)) return true;
    const gone = this.#gone.get(ref);
    const now = this.#o.clock.now();
    if (gone === undefined || now - gone.at > GONE_MEMORY_MS) return false;
    this.wait(gone.entry, this.#o.queuedUntil(ref) ?? now + GONE_MEMORY_MS);
    return this.#waiting.has(ref);
  }

  /** Stops retrying (waiting tasks end by their deadlines) and waits for a try in progress. Idempotent. */
  async close(): Promise<void> {
    this.#state = 'closed';
    clearInterval(this.#timer);
    this.#timer = undefined;
    this.#waiting.clear();
    await this.#trying;
  }

  /** Tries on a timer, not on fleet changes: those come with every lease under load, room rarely. */
  #start(): void {
    if (this.#timer !== undefined) return;
    this.#timer = setInterval(() => this.#kick(), this.#o.retryMs ?? 500);
    this.#timer.unref();
  }

  #stopIfIdle(): void {
    if (this.#waiting.size > 0) return;
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /** One try at a time; a change during a try asks for one more. */
  #kick(): void {
    if (this.#trying !== undefined) {
      this.#again = true;
      return;
    }
    this.#trying = this.#tryAll()
      .catch((err: unknown) => this.#o.logger.warn({ err }, 'room wait: a try failed'))
      .finally(() => {
        this.#trying = undefined;
        if (this.#again && this.#state === 'running') {
          this.#again = false;
          this.#kick();
        }
      });
  }

  async #tryAll(): Promise<void> {
    const now = this.#o.clock.now();
    for (const [ref, g] of this.#gone) if (now - g.at > GONE_MEMORY_MS) this.#gone.delete(ref);
    // Longest waiting first: the one a swap is due for.
    for (const w of [...this.#waiting.values()].sort((a, b) => a.since - b.since)) {
      if (this.#state !== 'running') return;
      const pools = this.#o.fleet.pools();
      if (now > w.until || poolsOfEntry(w.entry, pools).some(isCopy)) {
        this.#waiting.delete(w.entry.ref);
        continue;
      }
      try {
        await this.#o.loads.load(w.entry);
        continue; // started, or a load is in flight: its pool is listed soon
      } catch (err) {
        if (!(err instanceof InsufficientMemoryError)) {
          // Not a matter of room (the model is gone from the catalog, every node refused): its tasks end by their deadlines.
          this.#o.logger.warn({ err, model: w.entry.id }, 'room wait: the load was refused; no more tries');
          this.#waiting.delete(w.entry.ref);
          continue;
        }
      }
      if (now - w.since >= this.#swapWaitMs) await this.#swapFor(w, now);
    }
    this.#stopIfIdle();
  }

  /** Drains a busy copy of another model for `w` (eviction.ts's swapVictim); its model waits in turn. */
  async #swapFor(w: Waiting, now: number): Promise<void> {
    const entries = await this.#o.catalog.list();
    const victim = swapVictim(w.entry, entries, this.#o.fleet.pools(), this.#o.fleet.nodes());
    if (victim === undefined) return;
    const why = `swapped out for '${w.entry.id}', which waited ${now - w.since} ms for room`;
    if (!(await this.#o.loads.unloadCopy(victim.pool, this.#swapDrainMs, why, 'swap'))) return;
    w.since = now;
    this.keepWaiting(victim.entry);
    this.#o.logger.info(
      {
        model: w.entry.id,
        victim: poolKey(victim.pool),
        human: `Swap for model '${w.entry.id}': ${poolKey(victim.pool)} drains`,
      },
      'model swap',
    );
  }
}

/**
 * What a copy of a waiting model will serve, for admission's kind check: its policy's `serve`;
 * generation includes infill, which only the loaded engine confirms (a model without
 * fill-in-the-middle tokens is then refused at placement).
 */
export function awaitedCapabilities(serve: ModelServe): readonly PoolCapability[] {
  if (serve === 'embeddings') return ['embeddings'];
  if (serve === 'reranking') return ['rerank'];
  return ['chat', 'completion', 'infill'];
}
