import { randomBytes } from 'node:crypto';
import { resolveTaskRequest, TaskRequestSchema } from '@llama-orch/contracts';
import { freeLoopbackPort } from '@llama-orch/daemon-support';
import { startOtlpReceiver } from '@llama-orch/daemon-support/otlp-receiver';
import { startTracing } from '@llama-orch/daemon-support/tracing';
import { FixturePoolManager } from '@llama-orch/fixture-pool-manager';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { leaveTask } from '../testing/leftover-tasks.js';
import { annAuth, CLUSTER_HEARTBEAT_MS, NODE, replicaHarness, until } from '../testing/replica-harness.js';
import { captureLogger, frames, taskBody } from '../testing/test-helpers.js';

// A task taken over from a replica that died continues its trace (spec 60, Tracing): the shared
// record keeps the first replica's task span as a traceparent, and the adopter's task span is its
// child, linked to it. One traced replica on Redis adopts what a dead one left (FIXTURE node).
describe('tracing across a takeover', () => {
  const h = replicaHarness();
  afterEach(() => {
    vi.unstubAllEnvs();
  });

  it('the adopting replica’s task span is a child of, and linked to, the dead replica’s task span', async () => {
    const receiver = await startOtlpReceiver();
    h.defer(() => receiver.close());
    vi.stubEnv('OTEL_EXPORTER_OTLP_ENDPOINT', receiver.url);
    vi.stubEnv('OTEL_BSP_SCHEDULE_DELAY', '20');
    const tracing = await startTracing({
      serviceName: 'orchestratord',
      env: process.env,
      logger: captureLogger().logger,
    });
    h.defer(() => tracing.close());
    const r = await h.replica('traced-takeover:', { heartbeat_interval_ms: CLUSTER_HEARTBEAT_MS }, { tracing });
    const url = await r.app.listen({ port: 0, host: '127.0.0.1' });
    const node = await FixturePoolManager.start({
      nodeId: 'n1',
      pools: [{ pool_id: 'p', models: ['m'], slots: 1 }],
      token: NODE,
    });
    h.defer(() => node.close());
    expect(await node.register(url)).toBe(200);
    await node.startHeartbeats(url, 200);
    h.defer(() => Promise.resolve(node.stopHeartbeats()));
    await until(() => r.app.services.registry.poolsForModel('m')[0]?.node_state === 'online', 'n1 online');

    // what the dead replica left: a queued task whose record names its task span
    const traceId = randomBytes(16).toString('hex');
    const spanId = randomBytes(8).toString('hex');
    const address = `http://127.0.0.1:${await freeLoopbackPort()}`;
    await r.store.replicas.announce(
      { replica_id: 'dead', address, version: 'x', up_since: Date.now(), tasks_relayed: 0, load: 0 },
      60_000,
    );
    const o = taskBody({ max_tokens: 3 });
    const request = resolveTaskRequest(TaskRequestSchema.parse(o), {
      deadlineMs: 60_000,
      newId: () => String(o.task_id),
    });
    await leaveTask(r.store, {
      id: String(o.task_id),
      owner: 'dead',
      record: {
        model_ref: 'm',
        priority: 'interactive',
        session_id: o.session_id,
        admitted_at: Date.now(),
        owner_url: address,
        request,
        correlation_id: 'c',
        delivery: 'events',
        traceparent: `00-${traceId}-${spanId}-01`,
      },
      lane: 'interactive',
      ownerTtlMs: 60_000,
    });
    // its client resumes through the live replica, which finds the owner dead and takes the task over
    let res = await r.app.inject({ method: 'GET', url: `/v2/tasks/${String(o.task_id)}/events`, headers: annAuth });
    for (let i = 0; res.statusCode >= 500 && i < 20; i++) {
      await new Promise((ok) => setTimeout(ok, 100));
      res = await r.app.inject({ method: 'GET', url: `/v2/tasks/${String(o.task_id)}/events`, headers: annAuth });
    }
    expect(res.statusCode, res.body).toBe(200);
    expect(frames(res.body).at(-1)?.event).toBe('end');

    const spans = await receiver.waitFor(
      (all) => all.some((s) => s.name === 'text_completion m' && s.trace_id === traceId),
      5000,
    );
    const task = spans.find((s) => s.name === 'text_completion m' && s.trace_id === traceId)!;
    expect(task.parent_span_id).toBe(spanId);
    expect(task.links.map((l) => [l.trace_id, l.span_id])).toEqual([[traceId, spanId]]);
    expect(task.attributes['llorch.adopted_from']).toBe('dead');
    const dispatch = spans.find((s) => s.name === 'dispatch' && s.trace_id === traceId);
    expect(dispatch?.parent_span_id).toBe(task.span_id);
    expect(node.dispatches.at(-1)?.traceparent).toBe(`00-${traceId}-${dispatch!.span_id}-01`);
  });
});
