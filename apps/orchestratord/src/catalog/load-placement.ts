import { randomBytes } from 'node:crypto';
import type { FleetNode, FleetPool } from './fleet.js';

/**
 * Where a catalog model is loaded: pure choices, so their tests need no fleet.
 *
 * A node takes loads when it is not offline (a node still `registering` has reported its memory
 * and is up) and reports on-demand `memory`; its room is
 * `budget_bytes − used_bytes`. The model's need is known once some pool has run it (the largest
 * `memory_bytes` its pools reported); then only nodes with that much room are asked. Unknown, every
 * node with room is a candidate. Most room first (ties by node id), so loads spread; the node
 * itself projects the need with llama.cpp's fit logic and refuses with INSUFFICIENT_MEMORY when the
 * model does not fit, and the next candidate is asked.
 */

export interface LoadCandidates {
  /** Nodes to ask, in order. */
  readonly nodes: readonly FleetNode[];
  /** The model's known memory need, bytes; undefined when no pool of it reported one. */
  readonly needBytes: number | undefined;
  /** Nodes not offline that take loads at all (with `memory`), whether or not they have room. */
  readonly onDemand: number;
}

export function roomOf(n: FleetNode): number {
  return n.memory === undefined ? 0 : Math.max(0, n.memory.budget_bytes - n.memory.used_bytes);
}

/** The largest memory a pool of the model reported, bytes. */
export function knownNeed(pools: readonly FleetPool[]): number | undefined {
  let need: number | undefined;
  for (const p of pools) {
    const m = p.snapshot.memory_bytes;
    if (m !== undefined && m > 0) need = Math.max(need ?? 0, m);
  }
  return need;
}

/**
 * `remembered`: the need a copy of the model reported before it went (an eviction, an unload), when
 * no pool lists it now: without it, a model swapped back in would ask a node that has no room.
 */
export function loadCandidates(
  nodes: readonly FleetNode[],
  modelPools: readonly FleetPool[],
  remembered?: number,
): LoadCandidates {
  const onDemand = nodes.filter((n) => n.state !== 'offline' && n.memory !== undefined);
  const needBytes = knownNeed(modelPools) ?? remembered;
  const fits = onDemand.filter((n) => roomOf(n) > 0 && (needBytes === undefined || roomOf(n) >= needBytes));
  fits.sort((a, b) => roomOf(b) - roomOf(a) || (a.node_id < b.node_id ? -1 : a.node_id > b.node_id ? 1 : 0));
  return { nodes: fits, needBytes, onDemand: onDemand.length };
}

/** Room for `-` and the 6-character suffix in a pool id of at most 64 characters. */
const SLUG_MAX = 57;

/**
 * A new pool's id, `<model-slug>-<6 random>`: the slug is the ref's last segment (path or `:`),
 * without a `.gguf` extension, in the pool id alphabet (`[a-z0-9][a-z0-9_-]*`); `model` when
 * nothing is left. The random part keeps concurrent loads of one model on one node apart.
 */
export function loadPoolId(
  ref: string,
  random: () => string = () => randomBytes(4).toString('hex').slice(0, 6),
): string {
  const last =
    ref
      .split(/[/:]/)
      .filter((s) => s !== '')
      .pop() ?? '';
  const slug = last
    .replace(/\.gguf$/i, '')
    .toLowerCase()
    .replace(/[^a-z0-9_-]+/g, '-')
    .replace(/-{2,}/g, '-')
    .replace(/^[^a-z0-9]+/, '')
    .slice(0, SLUG_MAX)
    .replace(/[-_]+$/, '');
  return `${slug === '' ? 'model' : slug}-${random()}`;
}
