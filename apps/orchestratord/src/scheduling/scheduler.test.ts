import { afterEach, describe, expect, it } from 'vitest';
import { AdmissionQueue } from '../admission/admission-queue.js';
import { NodeRegistry } from '../registry/node-registry.js';
import { captureLogger, ManualClock, snapshot } from '../testing/test-helpers.js';
import { PlacementTicket } from './placement-ticket.js';
import { Scheduler } from './scheduler.js';

interface Item {
  readonly id: string;
  readonly ticket: PlacementTicket;
}

describe('Scheduler', () => {
  const registries: NodeRegistry[] = [];
  afterEach(async () => {
    await Promise.all(registries.splice(0).map((r) => r.close()));
  });

  function setup(): { registry: NodeRegistry; queue: AdmissionQueue<Item>; scheduler: Scheduler<Item>; log: string[] } {
    const registry = new NodeRegistry({
      heartbeatIntervalMs: 1000,
      clock: new ManualClock(),
      logger: captureLogger().logger,
    });
    registries.push(registry);
    const pools = [
      snapshot({ pool_id: 'a', models: ['m'], slots_total: 1, slots_free: 1 }),
      snapshot({ pool_id: 'b', models: ['other'], slots_total: 2, slots_free: 2 }),
    ];
    registry.register({
      node_id: 'n',
      machine_id: 'n',
      address: 'http://n.invalid:1',
      pools,
      capabilities: { gpus: [], cpu_cores: 1, ram_total_bytes: 1 },
      version: 't',
    });
    registry.heartbeat('n', { timestamp: new Date().toISOString(), pools });
    const queue = new AdmissionQueue<Item>({ capacity: 10, policy: 'reject' });
    const log: string[] = [];
    const scheduler = new Scheduler<Item>({
      registry,
      strategy: 'least-loaded',
      line: queue,
      events: {
        waiting: (t) => log.push(`wait ${t.id}`),
        unplaceable: (t, d) => log.push(`reject ${t.id} ${d.code}`),
        assigned: (t, view) => log.push(`assign ${t.id} ${view.pool_id}`),
        moved: () => log.push('moved'),
      },
    });
    return { registry, queue, scheduler, log };
  }

  const item = (id: string, model: string): Item => ({ id, ticket: new PlacementTicket({ model_ref: model, ctx: 0 }) });

  it('leases a slot per assignment inside the pass; tasks with one wait key share a decision; waiters do not block another model; waiting is reported once', () => {
    const { registry, queue, scheduler, log } = setup();
    for (const [id, model] of [
      ['t1', 'm'],
      ['t2', 'm'],
      ['t3', 'm'],
      ['t4', 'other'],
      ['t5', 'nowhere'],
    ] as const)
      queue.enqueue(id, 'interactive', item(id, model));
    scheduler.pump();
    expect(log).toEqual(['assign t1 a', 'wait t2', 'assign t4 b', 'reject t5 MODEL_NOT_AVAILABLE', 'moved']);
    expect([...queue].map((e) => e.id)).toEqual(['t2', 't3']);
    expect(registry.poolsForModel('m')[0]?.leased).toBe(1);
    // t3 shares t2's decision (same wait key): skipped, never evaluated; t2 waits again unreported.
    scheduler.pump();
    expect(log.filter((l) => l.startsWith('wait'))).toEqual(['wait t2']);
    scheduler.close();
    const before = log.length;
    scheduler.pump();
    expect(log).toHaveLength(before);
  });

  it("a ticket's wait key changes only when a pool is avoided", () => {
    const ticket = new PlacementTicket({ model_ref: 'm', ctx: 0 });
    const key = ticket.waitKey;
    expect(ticket.exclude).toBeUndefined();
    expect(new PlacementTicket({ model_ref: 'm', ctx: 0 }).waitKey).toBe(key);
    ticket.avoid({ node_id: 'n', pool_id: 'a' });
    expect(ticket.exclude).toEqual(new Set(['n/a']));
    expect(ticket.waitKey).not.toBe(key);
  });
});
