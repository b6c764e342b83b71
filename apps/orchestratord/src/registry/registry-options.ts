import type { Clock, Log } from '@llama-orch/daemon-support';

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
