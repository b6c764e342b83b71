import type { NodeMemory, NodeRegisterRequest, NodeState, PoolSnapshot } from '@llama-orch/contracts';
import type { Clock } from '@llama-orch/daemon-support';
import { isLate, lastSeenOf } from '../../store/liveness.js';
import type { NodeLivenessStore, StoredNode } from '../../store/node-liveness-store.js';

interface MutableNode {
  request: NodeRegisterRequest;
  state: NodeState;
  stateSince: number;
  lastSeen: number;
  pools: readonly PoolSnapshot[];
  memory: NodeMemory | undefined;
}

/** Node records, liveness and the offline sweep, in memory (the reference model of `NodeLivenessStore`). */
export class ReferenceNodes implements NodeLivenessStore {
  readonly #nodes = new Map<string, MutableNode>();
  readonly #clock: Clock;
  readonly #intervalMs: number;

  constructor(clock: Clock, heartbeatIntervalMs: number) {
    this.#clock = clock;
    this.#intervalMs = heartbeatIntervalMs;
  }

  register(req: NodeRegisterRequest): Promise<StoredNode> {
    const now = this.#clock.now();
    const node: MutableNode = {
      request: req,
      state: 'registering',
      stateSince: now,
      lastSeen: now,
      pools: req.pools,
      memory: req.memory,
    };
    this.#nodes.set(req.node_id, node);
    return Promise.resolve(copy(node));
  }

  heartbeat(
    nodeId: string,
    pools: readonly PoolSnapshot[],
    sentAtMs: number | undefined,
    memory?: NodeMemory,
  ): Promise<{ readonly previous: NodeState } | undefined> {
    const node = this.#nodes.get(nodeId);
    if (node === undefined) return Promise.resolve(undefined);
    const now = this.#clock.now();
    const previous = node.state;
    node.lastSeen = lastSeenOf(sentAtMs, now, this.#intervalMs);
    if (previous !== 'online') node.stateSince = now;
    node.state = 'online';
    node.pools = pools;
    if (memory !== undefined) node.memory = memory;
    return Promise.resolve({ previous });
  }

  deregister(nodeId: string): Promise<boolean> {
    return Promise.resolve(this.#nodes.delete(nodeId));
  }

  sweep(): Promise<string[]> {
    const now = this.#clock.now();
    const marked: string[] = [];
    for (const [id, node] of this.#nodes) {
      if (node.state === 'offline' || !isLate(node.lastSeen, now, this.#intervalMs)) continue;
      node.state = 'offline';
      node.stateSince = now;
      marked.push(id);
    }
    return Promise.resolve(marked);
  }

  get(nodeId: string): Promise<StoredNode | undefined> {
    const node = this.#nodes.get(nodeId);
    return Promise.resolve(node === undefined ? undefined : copy(node));
  }

  list(): Promise<StoredNode[]> {
    return Promise.resolve(
      [...this.#nodes.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, n]) => copy(n)),
    );
  }
}

function copy(n: MutableNode): StoredNode {
  return {
    request: n.request,
    state: n.state,
    stateSince: n.stateSince,
    lastSeen: n.lastSeen,
    pools: n.pools,
    ...(n.memory !== undefined ? { memory: n.memory } : {}),
  };
}
