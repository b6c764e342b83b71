import { z } from 'zod';
import {
  DispatchEventSchema,
  DispatchPathSchema,
  DispatchReattachQuerySchema,
  DispatchRequestSchema,
  DispatchResultEventSchema,
  DrainRequestSchema,
  ManagerHealthSchema,
  PoolOperationResponseSchema,
  PoolStatusListSchema,
  PoolStatusSchema,
  ReloadRequestSchema,
  ManagerReadinessSchema,
} from '@llama-orch/contracts';
import { id, nodeAuth, probes, selfDescription, type RouteSpec } from './routes.js';

// pool-managerd's API, described once for its generated OpenAPI document (routes.ts has the others).
/** HTTP API of pool-managerd, used by orchestratord and operators. */
export const POOL_MANAGER: RouteSpec[] = [
  ...probes(
    ManagerReadinessSchema,
    'the API serves and no pool is still in its first provisioning; failed pools are listed, not a cause; 503 otherwise',
  ),
  {
    method: 'get',
    path: '/health',
    summary: 'Daemon health',
    auth: true,
    ok: { status: 200, schema: ManagerHealthSchema },
    errors: nodeAuth,
  },
  {
    method: 'get',
    path: '/v2/pools',
    summary: 'Pools of this node',
    auth: true,
    ok: { status: 200, schema: PoolStatusListSchema },
    errors: nodeAuth,
  },
  {
    method: 'get',
    path: '/v2/pools/{id}',
    summary: 'One pool',
    auth: true,
    params: id,
    ok: { status: 200, schema: PoolStatusSchema },
    errors: [...nodeAuth, 404],
  },
  {
    method: 'post',
    path: '/v2/pools/{id}/drain',
    summary: 'Stop new leases, finish in-flight, stop',
    auth: true,
    params: id,
    body: DrainRequestSchema,
    ok: { status: 202, schema: PoolOperationResponseSchema },
    errors: [400, ...nodeAuth, 404],
  },
  {
    method: 'post',
    path: '/v2/pools/{id}/reload',
    summary: 'Drain, switch model, start; roll back on failure',
    auth: true,
    params: id,
    body: ReloadRequestSchema,
    ok: { status: 202, schema: PoolOperationResponseSchema },
    errors: [400, ...nodeAuth, 404, 503],
  },
  {
    method: 'post',
    path: '/v2/pools/{id}/completions',
    summary: 'Run one completion on a leased slot',
    auth: true,
    params: id,
    body: DispatchRequestSchema,
    ok: {
      status: 200,
      contentType: 'application/x-ndjson',
      schema: z.union([DispatchEventSchema, DispatchResultEventSchema]),
      description:
        "One DispatchEvent per line: token* then exactly one end or error. With stream: false, exactly one line: a DispatchResultEvent (the engine's non-streamed answer) or an error. Closing the request cancels the engine request.",
    },
    errors: [400, ...nodeAuth, 404, 503],
  },
  {
    method: 'get',
    path: '/v2/pools/{id}/dispatches/{task_id}',
    summary: 'Re-attach to a re-attachable dispatch (reattach_ms): held token events after `after`, then the live ones',
    auth: true,
    params: DispatchPathSchema,
    query: DispatchReattachQuerySchema,
    ok: {
      status: 200,
      contentType: 'application/x-ndjson',
      schema: DispatchEventSchema,
      description:
        'One DispatchEvent per line: the held token events with i > after (absent or -1: all), then the live ones, then exactly one end or error. A connection attached before is ended without cancelling the generation (last attacher wins). 404 when no such dispatch is held.',
    },
    errors: [400, ...nodeAuth, 404],
  },
  {
    method: 'delete',
    path: '/v2/pools/{id}/dispatches/{task_id}',
    summary:
      'Cancel a re-attachable dispatch: the engine request is aborted, an attached connection gets end with stop_type cancel',
    auth: true,
    params: DispatchPathSchema,
    ok: { status: 204 },
    errors: [400, ...nodeAuth, 404],
  },
  ...selfDescription,
];
