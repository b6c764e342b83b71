import { FixturePoolManager } from './fixture-pool-manager.js';

/**
 * FIXTURE fleet for benchmarks (not a product component): several FixturePoolManagers — virtual
 * nodes — in one process, each on its own ports (its own origin, so orchestratord's per-origin
 * connection limit applies per node as with real nodes) and with one pool. Each registers with
 * orchestratord, heartbeats, and serves dispatch on HTTP/1.1 and on h2c (registered as
 * `dispatch_h2c`, as pool-managerd does). Tokens carry their send time (`tokens: 'clock'`,
 * token-text.ts); nothing is recorded, since a benchmark runs for minutes.
 */

export type FixtureFleetMode =
  /** Pools report free slots and stream tokens. */
  | 'stream'
  /** Pools are ready but report 0 free slots (`busy`): tasks for their model wait in orchestratord's queue. */
  | 'busy';

export interface FixtureFleetOptions {
  orchestratorUrl: string;
  token: string;
  /** Virtual nodes (ports) in this process. */
  nodes: number;
  /** Slots of each node's pool. */
  slotsPerPool: number;
  /** Model ref the pools serve. */
  model: string;
  mode: FixtureFleetMode;
  /** Period between tokens of one stream, ms. The first token comes after a random fraction of it. */
  tokenIntervalMs: number;
  heartbeatMs: number;
  /** Prefix of node ids (`{prefix}-node-{i}`) and pool ids (`{prefix}-{i}`). @default 'fixture' */
  idPrefix?: string;
}

/** `starting` until every node registered; `closing` stops heartbeats and streams. */
export type FixtureFleetState = 'starting' | 'running' | 'closing' | 'closed';

export class FixtureFleet {
  readonly options: FixtureFleetOptions;
  readonly #nodes: FixturePoolManager[] = [];
  #state: FixtureFleetState = 'starting';
  #closing: Promise<void> | undefined;

  constructor(options: FixtureFleetOptions) {
    this.options = options;
  }

  get state(): FixtureFleetState {
    return this.#state;
  }

  get nodeIds(): string[] {
    return this.#nodes.map((n) => n.nodeId);
  }

  get urls(): string[] {
    return this.#nodes.map((n) => n.url);
  }

  /** Listens on every node's ports, then registers each; throws if orchestratord refuses one. */
  async start(): Promise<void> {
    const o = this.options;
    const prefix = o.idPrefix ?? 'fixture';
    const busy = o.mode === 'busy';
    for (let i = 0; i < o.nodes; i++) {
      const node = await FixturePoolManager.start({
        nodeId: `${prefix}-node-${i}`,
        pools: [
          {
            pool_id: `${prefix}-${i}`,
            models: [o.model],
            slots: o.slotsPerPool,
            ctx: 4096,
            engine_version: 'fixture',
            busy,
            // Busy pools never decode; a high rate keeps the admission predictor from refusing on deadline.
            decode_tps: busy ? 10_000 : 1000 / o.tokenIntervalMs,
          },
        ],
        token: o.token,
        tokenIntervalMs: o.tokenIntervalMs,
        h2c: true,
        tokens: 'clock',
        record: false,
      });
      // close() began while this node was binding: it closed the others, not this one.
      if (this.#closing !== undefined) return node.close();
      this.#nodes.push(node);
    }
    for (const n of this.#nodes) {
      if (this.#closing !== undefined) break;
      const status = await n.startHeartbeats(o.orchestratorUrl, o.heartbeatMs);
      if (status !== 200) throw new Error(`register ${n.nodeId}: HTTP ${status}`);
    }
    if (this.#closing === undefined) this.#state = 'running';
  }

  /** Stops heartbeats and drops every stream and connection; calling it again returns the same promise. */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      this.#state = 'closing';
      await Promise.all(this.#nodes.map((n) => n.close()));
      this.#state = 'closed';
    })();
    return this.#closing;
  }
}
