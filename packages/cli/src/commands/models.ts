import { ClusterModelListSchema, ClusterModelSchema, type ClusterModel } from '@llama-orch/contracts';
import { PLAIN, type Paint } from '../color.js';
import { callJson, type Target } from '../http.js';
import { renderTable } from '../table.js';
import { stateColour } from './status.js';

/** `GET /v2/catalog/models`: each model once — catalog entries and what static pools serve. */
export async function listModels(target: Target): Promise<ClusterModel[]> {
  return (await callJson(target, 'GET', '/v2/catalog/models', ClusterModelListSchema)).models;
}

/** `llorch models`: ref, aliases, status, where it is loaded, since when it is idle, whether it is pinned, why it failed. */
export function renderModels(models: readonly ClusterModel[], paint: Paint = PLAIN): string {
  if (models.length === 0) return 'no models';
  return renderTable(
    [
      ['MODEL', 'ALIASES', 'STATUS', 'LOADED ON', 'IDLE SINCE', 'PINNED', 'LAST ERROR'],
      ...models.map((m) => [
        m.id,
        m.aliases.join(',') || '-',
        m.status,
        m.pools.join(',') || '-',
        m.idle_since ?? '-',
        m.pinned ? 'yes' : 'no',
        m.last_error ?? '',
      ]),
    ],
    stateColour(paint, 2),
  );
}

const modelPath = (model: string, op: 'load' | 'unload'): string =>
  `/v2/catalog/models/${encodeURIComponent(model)}/${op}`;

/** `llorch load <model> [--node N]`: POST /v2/catalog/models/{id}/load; a load already under way is not asked twice. */
export async function loadModel(target: Target, model: string, node: string | undefined): Promise<string> {
  const m = await callJson(
    target,
    'POST',
    modelPath(model, 'load'),
    ClusterModelSchema,
    node === undefined ? {} : { node },
  );
  const where = m.pools.length > 0 ? ` on ${m.pools.join(',')}` : '';
  return `load of model '${m.id}' accepted (${m.status}${where}); \`llorch models\` shows its progress`;
}

/** `llorch unload <model> [--node N]`: POST /v2/catalog/models/{id}/unload; copies drain, never below the model's pin. */
export async function unloadModel(
  target: Target,
  model: string,
  opts: { node: string | undefined; deadlineMs: number },
): Promise<string> {
  const body = { deadline_ms: opts.deadlineMs, ...(opts.node !== undefined ? { node: opts.node } : {}) };
  const m = await callJson(target, 'POST', modelPath(model, 'unload'), ClusterModelSchema, body);
  return `unload of model '${m.id}' accepted (${m.status}); \`llorch models\` shows its progress`;
}
