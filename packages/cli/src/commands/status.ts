import { ClusterPoolListSchema, NodeListSchema, type ClusterPool } from '@llama-orch/contracts';
import type { z } from 'zod';
import { PLAIN, type Paint } from '../color.js';
import { callJson, callText, type Target } from '../http.js';
import { renderTable } from '../table.js';

type NodeInfo = z.infer<typeof NodeListSchema>['nodes'][number];

/** `llorch status --json`: the same facts as the tables, as one document. */
export interface StatusDocument {
  nodes: NodeInfo[];
  pools: ClusterPool[];
  /** Tasks waiting for a slot (orchestratord's queue-depth gauge; null when /metrics has none). */
  queued: number | null;
  /** Slots leased right now, summed over the pools. */
  leased: number;
}

/** `GET /v2/nodes`. */
export async function listNodes(target: Target): Promise<NodeInfo[]> {
  return (await callJson(target, 'GET', '/v2/nodes', NodeListSchema)).nodes;
}

export function renderNodes(nodes: readonly NodeInfo[], paint: Paint = PLAIN): string {
  if (nodes.length === 0) return 'no nodes registered';
  return renderTable(
    [
      ['NODE', 'STATE', 'ADDRESS', 'POOLS', 'GPUS', 'CPUS', 'LAST SEEN'],
      ...nodes.map((n) => [
        n.node_id,
        n.state,
        n.address,
        String(n.pools.length),
        String(n.capabilities.gpus.length),
        String(n.capabilities.cpu_cores),
        n.last_seen,
      ]),
    ],
    stateColour(paint, 1),
  );
}

/** `llorch nodes`: one line per registered node. */
export async function nodesTable(target: Target, paint: Paint = PLAIN): Promise<string> {
  return renderNodes(await listNodes(target), paint);
}

/** Sum of a metric over all its label sets in Prometheus text ('?' when absent). */
export function metricTotal(metrics: string, name: string): string {
  const samples = metrics.split('\n').filter((l) => l.startsWith(`${name} `) || l.startsWith(`${name}{`));
  if (samples.length === 0) return '?';
  return String(samples.reduce((sum, l) => sum + Number(l.split(' ').pop()), 0));
}

/**
 * The admission queue's depth from `/metrics`: the first gauge whose name ends in `queue_depth`
 * (`queue_depth` today, `llorch_…` once the metric names carry the prefix); null when none.
 */
export function queueDepth(metrics: string): number | null {
  const name = /^(\w*queue_depth)[ {]/m.exec(metrics)?.[1];
  if (name === undefined) return null;
  const total = Number(metricTotal(metrics, name));
  return Number.isFinite(total) ? total : null;
}

/** Everything `llorch status` shows. */
export async function statusDocument(target: Target): Promise<StatusDocument> {
  const [nodes, { pools }, metrics] = await Promise.all([
    listNodes(target),
    callJson(target, 'GET', '/v2/pools', ClusterPoolListSchema),
    callText(target, '/metrics'),
  ]);
  return { nodes, pools, queued: queueDepth(metrics), leased: pools.reduce((sum, p) => sum + p.leased, 0) };
}

export function renderStatus(doc: StatusDocument, paint: Paint = PLAIN): string {
  const poolTable =
    doc.pools.length === 0
      ? 'no pools'
      : renderTable(
          [
            ['POOL', 'NODE', 'STATE', 'READY', 'SLOTS FREE/TOTAL', 'LEASED', 'MODELS', 'ENGINE', 'LAST ERROR'],
            ...doc.pools.map((p) => [
              p.pool_id,
              p.node_id,
              p.draining ? `${p.state} (draining)` : p.state,
              p.ready ? 'yes' : 'no',
              `${p.slots_free}/${p.slots_total}`,
              String(p.leased),
              p.models.join(','),
              p.engine_version,
              p.last_error ?? '',
            ]),
          ],
          stateColour(paint, 2),
        );
  const queue = renderTable([
    ['QUEUED', 'RUNNING (leased slots)'],
    [doc.queued === null ? '?' : String(doc.queued), String(doc.leased)],
  ]);
  return `Nodes\n${renderNodes(doc.nodes, paint)}\n\nPools\n${poolTable}\n\nQueue\n${queue}`;
}

/** `llorch status`: nodes, pools and the admission queue. */
export async function statusReport(target: Target, paint: Paint = PLAIN): Promise<string> {
  return renderStatus(await statusDocument(target), paint);
}

/** Colours one column of a table by the state word it holds (after padding, so columns stay aligned). */
export function stateColour(paint: Paint, column: number): (cell: string, col: number, row: number) => string {
  return (cell, col, row) => {
    if (col !== column || row === 0 || !paint.enabled) return cell;
    if (/^(ready|online)\b/.test(cell)) return paint.green(cell);
    if (/^(failed|offline|unavailable)\b/.test(cell)) return paint.red(cell);
    return paint.yellow(cell);
  };
}
