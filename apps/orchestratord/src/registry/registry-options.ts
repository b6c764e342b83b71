import type { Clock, Log } from '@llama-orch/daemon-support';
import type { NodeMemory, NodeRegisterRequest, NodeState, PoolSnapshot } from '@llama-orch/contracts';
import type { NodeFacts } from './pool-accounting.js';

// What a `NodeRegistry` is built with, and what it tells its subscribers.

export type RegistryEvent =
  | { readonly type: 'registered' | 'online' | 'offline' | 'deregistered'; readonly nodeId: string }
  | { readonly type: 'heartbeat'; readonly nodeId: string }
  | { readonly type: 'lease-released'; readonly nodeId: string; readonly poolId: string }
  /** A drain was forwarded to the pool's node (it is unplaceable before the node's next heartbeat says so). */
  | { readonly type: 'draining'; readonly nodeId: string; readonly poolId: string };

export interface NodeRegistryOptions {
  /** Expected heartbeat interval (ms); offline after 3 missed. */
  heartbeatIntervalMs: number;
  clock: Clock;
  logger: Log;
  /** How long a pool that answered 503 stays saturated without a heartbeat. @default min(heartbeatIntervalMs, 500) */
  saturationMs?: number;
  /** Node records and offline come from the cluster store (`applyStored`), not from this registry's timers. */
  livenessFromStore?: boolean;
}

/** A node as the registry keeps it. */
export interface NodeRecord extends NodeFacts {
  readonly request: NodeRegisterRequest;
  state: NodeState;
  /** When `state` was entered. */
  stateSince: number;
  /** When the last heartbeat was sent (node-registry.ts explains why), or the registration arrived. */
  lastSeen: number;
  pools: Map<string, PoolSnapshot>;
  /** Memory for models on demand, as last reported (registration, then heartbeats); absent = it loads none. */
  memory: NodeMemory | undefined;
  /** Fires 3 intervals after `lastSeen` (re-armed by each heartbeat). */
  deadline: NodeJS.Timeout | undefined;
}

export type RegistryState = 'running' | 'closed';
