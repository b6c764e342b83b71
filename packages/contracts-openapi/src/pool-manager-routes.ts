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
  PoolLoadRequestSchema,
  PoolStatusSchema,
  PoolUnloadQuerySchema,
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
    path: '/v2/pools',
    summary: "Load a catalog model as a new pool on this node's on-demand engine settings (orchestratord's loads)",
    description:
      "The pool goes through the same provisioning, engine start and handoff as the node's own pools; the heartbeat reports its progress (`provisioning` → `starting` → `ready`, or `failed` with `last_error`; a failed load is not retried). A model not on the host yet is admitted, then checked against the memory budget again before its engine starts.",
    auth: true,
    body: PoolLoadRequestSchema,
    ok: {
      status: 202,
      schema: PoolStatusSchema,
      description: 'Accepted: the new pool (`provisioning`, `origin: catalog`).',
    },
    errors: [400, ...nodeAuth, 409, 503],
    errorText: {
      409: 'This node loads no model on request (no `on_demand` in its config), or it has a pool with this id (CONFLICT)',
      503: '`max_pools` loads are listed already, or the projected memory does not fit the budget minus what the pools take, the figures in the message (INSUFFICIENT_MEMORY); shutting down (POOL_UNAVAILABLE). Retry-After and X-Backoff-Ms set',
    },
  },
  {
    method: 'delete',
    path: '/v2/pools/{id}',
    summary: 'Unload a pool loaded on request, from any state: drain, stop its engine, forget it',
    description:
      'The pool is `draining` at once (provisioning aborted, a starting engine stopped), takes no new lease, lets in-flight work run until `deadline_ms` and aborts it after; then its engine stops and the pool leaves `GET /v2/pools` and the heartbeat. Asked again while it unloads: 202 with its status.',
    auth: true,
    params: id,
    query: PoolUnloadQuerySchema,
    ok: { status: 202, schema: PoolStatusSchema, description: 'Unloading: the pool (`draining`).' },
    errors: [400, ...nodeAuth, 404, 409, 503],
    errorText: {
      409: "One of the node's own pools (its YAML's or adopted): not unloaded (CONFLICT)",
      503: 'A drain, reload or the shutdown holds the pool (POOL_UNAVAILABLE); Retry-After and X-Backoff-Ms set',
    },
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
