import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { ClusterPoolListSchema, type ClusterPool } from '@llama-orch/contracts';
import { callJson, type Target } from '../http.js';
import { CliError } from '../errors.js';

/** The lines `llorch up` prints once every pool is ready; `cluster` names what serves the API. */
export function upSummary(
  cluster: readonly string[],
  ready: readonly ClusterPool[],
  heading = 'llama-orch is up',
): string {
  const cli = join('packages', 'cli', 'dist', 'main.js');
  return [
    '',
    heading,
    ...cluster,
    ...ready.map(
      (p) =>
        `  pool ${p.pool_id} on node ${p.node_id}: ready, ${p.slots_total} slot(s), model ${p.models.join(', ')}${p.aliases?.length ? ` (clients may say ${p.aliases.join(', ')})` : ''}`,
    ),
    '  (synthetic:llama produces noise text from a real engine; configure an hf: model for real text)',
    '',
    `Try:  node ${cli} submit "Write a haiku about GPUs"`,
    `      node ${cli} status`,
    'Ctrl-C stops everything.',
    '',
  ].join('\n');
}

/** Polls `GET /v2/pools` until every pool is ready (at least one); undefined when `signal` aborts first. */
export async function waitReady(
  target: Target,
  timeoutMs: number,
  signal: AbortSignal,
): Promise<ClusterPool[] | undefined> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline && !signal.aborted) {
    const pools = await callJson(target, 'GET', '/v2/pools', ClusterPoolListSchema).then(
      (r) => r.pools,
      () => [],
    );
    const ready = pools.filter((p) => p.ready);
    if (ready.length > 0 && ready.length === pools.length) return ready;
    await sleep(500, undefined, { signal }).catch(() => undefined);
  }
  if (!signal.aborted) throw new CliError(`no ready pool after ${Math.round(timeoutMs / 1000)} s`);
  return undefined;
}
