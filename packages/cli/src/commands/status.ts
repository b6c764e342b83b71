import { ClusterPoolListSchema, NodeListSchema } from '@llama-orch/contracts';
import { callJson, callText, type Target } from '../http.js';
import { renderTable } from '../table.js';

/** `llorch nodes`: one line per registered node. */
export async function nodesTable(target: Target): Promise<string> {
  const { nodes } = await callJson(target, 'GET', '/v2/nodes', NodeListSchema);
  if (nodes.length === 0) return 'no nodes registered';
  return renderTable([
    ['NODE', 'STATE', 'ADDRESS', 'POOLS', 'GPUS', 'CPUS', 'LAST SEEN'],
    ...nodes.map((n) => [n.node_id, n.state, n.address, String(n.pools.length), String(n.capabilities.gpus.length), String(n.capabilities.cpu_cores), n.last_seen]),
  ]);
}

/** Sum of a metric over all its label sets in Prometheus text ('?' when absent). */
export function metricTotal(metrics: string, name: string): string {
  const samples = metrics.split('\n').filter((l) => l.startsWith(`${name} `) || l.startsWith(`${name}{`));
  if (samples.length === 0) return '?';
  return String(samples.reduce((sum, l) => sum + Number(l.split(' ').pop()), 0));
}

/** `llorch status`: nodes, pools and the admission queue. */
export async function statusReport(target: Target): Promise<string> {
  const [nodes, { pools }, metrics] = await Promise.all([
    nodesTable(target),
    callJson(target, 'GET', '/v2/pools', ClusterPoolListSchema),
    callText(target, '/metrics'),
  ]);
  const poolTable = pools.length === 0
    ? 'no pools'
    : renderTable([
        ['POOL', 'NODE', 'STATE', 'READY', 'SLOTS FREE/TOTAL', 'LEASED', 'MODELS', 'ENGINE', 'LAST ERROR'],
        ...pools.map((p) => [
          p.pool_id, p.node_id, p.draining ? `${p.state} (draining)` : p.state, p.ready ? 'yes' : 'no', `${p.slots_free}/${p.slots_total}`,
          String(p.leased), p.models.join(','), p.engine_version, p.last_error ?? '',
        ]),
      ]);
  const queue = renderTable([['QUEUED', 'RUNNING (leased slots)'], [metricTotal(metrics, 'queue_depth'), metricTotal(metrics, 'active_leases')]]);
  return `Nodes\n${nodes}\n\nPools\n${poolTable}\n\nQueue\n${queue}`;
}
