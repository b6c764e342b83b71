export { NetLab, netnsUnavailable, netemUnavailable, iptablesUnavailable, natRedirectUnavailable } from './net-lab.js';
export type { LabHost, LabLink } from './net-lab.js';
export {
  startReplica,
  startNode,
  startLabRedis,
  redisUnavailable,
  listPools,
  waitFor,
  waitPoolsReady,
} from './lab-daemons.js';
export type { ReplicaSpec, NodeSpec, LabRedis, ListedPool } from './lab-daemons.js';
export { openTask } from './lab-task.js';
export type { LiveTask, TaskOutcome, TaskSpec } from './lab-task.js';
export { startDelayRelay } from './delay-relay.js';
export type { DelayRelay, DelayRelayOptions, RelayMap } from './delay-relay.js';
export { relayNodeLinks, assertListensOnRelayedPorts, RELAYED_NODE_PORT, RELAYED_DISPATCH_PORT } from './relay-link.js';
export type { RelayedLinks } from './relay-link.js';
export { ImpairedCluster, percentile } from './impaired-cluster.js';
export type { ImpairedClusterOptions, ImpairedNode, ImpairedRun } from './impaired-cluster.js';
