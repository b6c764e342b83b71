export { NetLab, netnsUnavailable, netemUnavailable, iptablesUnavailable } from './net-lab.js';
export type { LabHost, LabLink } from './net-lab.js';
export { startReplica, startNode, startLabRedis, redisUnavailable, listPools, waitFor, waitPoolsReady } from './lab-daemons.js';
export type { ReplicaSpec, NodeSpec, LabRedis, ListedPool } from './lab-daemons.js';
export { openTask } from './lab-task.js';
export type { LiveTask, TaskOutcome, TaskSpec } from './lab-task.js';
