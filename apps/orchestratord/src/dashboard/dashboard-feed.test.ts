import { DashboardSnapshotSchema, type DashboardSnapshot } from '@llama-orch/contracts';
import { afterEach, describe, expect, it } from 'vitest';
import { NodeRegistry } from '../registry/node-registry.js';
import { systemClock, type Clock } from '@llama-orch/daemon-support';
import { TaskEvents, type EndedTask } from '../tasks/task-events.js';
import type { TaskLoad } from '../tasks/task-load.js';
import { captureLogger, ManualClock, snapshot, waitFor } from '../testing/test-helpers.js';
import { MemoryActivity } from '../store/memory/memory-activity.js';
import type { ReplicaInfo } from '../store/replica-membership-store.js';
import { DashboardFeed } from './dashboard-feed.js';

/**
 * The feed's task side as TaskService offers it: the real TaskEvents hub, a cumulative token
 * count and the queue's load, driven by the test.
 */
class TaskSide {
  readonly events = new TaskEvents();
  tokens = 0;
  loadCalls = 0;
  subscribe = (l: Parameters<TaskEvents['subscribe']>[0]) => this.events.subscribe(l);
  tokensRelayed = () => this.tokens;
  load = (): TaskLoad => {
    this.loadCalls += 1;
    return { depth: { interactive: 2, batch: 1 }, capacity: 8, running: 1, predictedWaitMs: 1234 };
  };
}

function ended(id: string, clock: Clock, over: Partial<EndedTask> = {}): EndedTask {
  const now = clock.now();
  return {
    taskId: id,
    correlationId: `corr-${id}`,
    model: 'm',
    priority: 'interactive',
    nodeId: 'n1',
    poolId: 'p',
    tokensOut: 3,
    ttftMs: 5,
    admittedAt: now - 20,
    endedAt: now,
    outcome: 'ok',
    code: undefined,
    ...over,
  };
}

describe('DashboardFeed', () => {
  const closers: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const c of closers.splice(0)) await c();
  });

  const make = (clock: Clock, over: Partial<ConstructorParameters<typeof DashboardFeed>[0]> = {}) => {
    const registry = new NodeRegistry({ heartbeatIntervalMs: 60_000, clock, logger: captureLogger().logger });
    const tasks = new TaskSide();
    // Hour-wide buckets unless a test sets them: no bucket end lands inside a test on the system clock.
    const replicas: ReplicaInfo[] = [
      {
        replica_id: 'r1',
        address: 'http://127.0.0.1:8080',
        version: '9.9.9',
        up_since: 1_699_999_000_000,
        tasks_relayed: 7,
        load: 1,
      },
    ];
    const feed = new DashboardFeed({
      registry,
      tasks,
      clock,
      version: '9.9.9',
      activity: new MemoryActivity(clock),
      replicaId: 'r1',
      replicas: () => replicas,
      logger: captureLogger().logger,
      bucketMs: 3_600_000,
      buckets: 5,
      recentTasks: 3,
      ...over,
    });
    closers.push(
      () => feed.close(),
      () => registry.close(),
    );
    return { registry, tasks, feed };
  };

  it('a snapshot shows nodes, pools (with aliases), the queue, throughput, recent tasks and replicas, and validates', async () => {
    const clock = new ManualClock(1_700_000_000_000);
    const { registry, tasks, feed } = make(clock, { bucketMs: 1000 });
    registry.register({
      node_id: 'n1',
      machine_id: 'h1',
      address: 'http://127.0.0.1:9',
      version: '0.1.0',
      pools: [snapshot({ pool_id: 'p', models: ['synthetic:llama'], aliases: ['synthetic'] })],
      capabilities: { gpus: [], cpu_cores: 2, ram_total_bytes: 1 },
    });
    tasks.events.emit({ type: 'first-token', taskId: 'a', at: clock.now(), ttftMs: 40 });
    tasks.tokens += 10;
    tasks.events.emit({ type: 'ended', task: ended('a', clock) });
    tasks.events.emit({
      type: 'ended',
      task: ended('b', clock, { outcome: 'error', code: 'WORKER_RESET', ttftMs: undefined, tokensOut: 0 }),
    });
    clock.advance(1000);
    const snap: DashboardSnapshot = DashboardSnapshotSchema.parse(await feed.snapshot());
    expect(snap).toMatchObject({
      version: '9.9.9',
      generated_at_ms: 1_700_000_001_000,
      bucket_ms: 1000,
      nodes: [{ node_id: 'n1', state: 'registering' }],
      pools: [{ pool_id: 'p', models: ['synthetic:llama'], aliases: ['synthetic'], node_state: 'registering' }],
      queue: { depth: { interactive: 2, batch: 1 }, capacity: 8, running: 1, predicted_wait_ms: 1234 },
      throughput: [{ t_ms: 1_700_000_000_000, tokens_per_s: 10, ttft_p50_ms: 40, tasks_ended: 2 }],
      replicas: [
        {
          replica_id: 'r1',
          address: 'http://127.0.0.1:8080',
          version: '9.9.9',
          up_since_ms: 1_699_999_000_000,
          tasks_relayed: 7,
          load: 1,
        },
      ],
    });
    expect(snap.recent_tasks.map((t) => [t.task_id, t.outcome, t.code])).toEqual([
      ['b', 'error', 'WORKER_RESET'],
      ['a', 'ok', undefined],
    ]);
  });

  it('keeps only the newest ended tasks, newest first', async () => {
    const clock = new ManualClock();
    const { tasks, feed } = make(clock);
    for (const id of ['1', '2', '3', '4', '5']) tasks.events.emit({ type: 'ended', task: ended(id, clock) });
    expect((await feed.snapshot()).recent_tasks.map((t) => t.task_id)).toEqual(['5', '4', '3']);
  });

  it('two replicas on one activity store show the same recent tasks and throughput; the store gets one write per closed bucket, not per token', async () => {
    const clock = new ManualClock(1_700_000_000_000);
    class CountingActivity extends MemoryActivity {
      bucketWrites = 0;
      override addThroughput(...args: Parameters<MemoryActivity['addThroughput']>): Promise<void> {
        this.bucketWrites += 1;
        return super.addThroughput(...args);
      }
    }
    const shared = new CountingActivity(clock);
    const a = make(clock, { bucketMs: 1000, activity: shared, replicaId: 'ra' });
    const b = make(clock, { bucketMs: 1000, activity: shared, replicaId: 'rb' });
    for (let i = 0; i < 200; i += 1) {
      a.tasks.events.emit({ type: 'first-token', taskId: `a${i}`, at: clock.now(), ttftMs: 10 });
      a.tasks.tokens += 5;
    }
    a.tasks.events.emit({ type: 'ended', task: ended('a', clock) });
    b.tasks.events.emit({ type: 'first-token', taskId: 'b', at: clock.now(), ttftMs: 30 });
    b.tasks.tokens += 20;
    b.tasks.events.emit({ type: 'ended', task: ended('b', clock) });
    clock.advance(1000);
    // B's bucket reaches the store when B closes it (its own snapshot, or its bucket timer)
    await b.feed.snapshot();
    const fromA = await a.feed.snapshot();
    const fromB = await b.feed.snapshot();
    expect(fromA.recent_tasks.map((t) => t.task_id).sort()).toEqual(['a', 'b']);
    expect(fromB.recent_tasks).toEqual(fromA.recent_tasks);
    expect(fromA.throughput).toEqual([
      { t_ms: 1_700_000_000_000, tokens_per_s: 1020, tasks_ended: 2, ttft_p50_ms: 10 },
    ]);
    expect(fromB.throughput).toEqual(fromA.throughput);
    expect(shared.bucketWrites).toBe(2); // one per replica for the one closed bucket
  });

  it('coalesces a burst of changes into one trailing notification, at most one per interval', async () => {
    const { registry, tasks, feed } = make(systemClock, { minIntervalMs: 150 });
    const got: DashboardSnapshot[] = [];
    feed.subscribe((s) => got.push(s));
    const built = tasks.loadCalls;
    for (let i = 0; i < 50; i += 1) tasks.events.emit({ type: 'admitted', taskId: `t${i}` });
    registry.register({
      node_id: 'n1',
      machine_id: 'h',
      address: 'http://127.0.0.1:9',
      version: 'x',
      pools: [],
      capabilities: { gpus: [], cpu_cores: 1, ram_total_bytes: 1 },
    });
    expect(got).toHaveLength(0); // trailing: nothing inside the burst
    await waitFor(() => got.length === 1, 2000, 'the coalesced snapshot');
    expect(tasks.loadCalls - built).toBe(1); // one snapshot built for 51 changes
    expect(got[0]?.nodes.map((n) => n.node_id)).toEqual(['n1']); // it shows the last change
    tasks.events.emit({ type: 'dispatched', taskId: 't0' });
    await waitFor(() => got.length === 2, 2000, 'the next snapshot');
    // The second one waited for the rest of the interval since the first (timers never fire early).
    expect((got[1]?.generated_at_ms ?? 0) - (got[0]?.generated_at_ms ?? 0)).toBeGreaterThanOrEqual(120);
    await new Promise((r) => setTimeout(r, 300));
    expect(got).toHaveLength(2); // nothing changed since: nothing pushed
  });

  it('builds nothing while nobody listens', async () => {
    const { tasks, feed } = make(systemClock, { minIntervalMs: 10 });
    const off = feed.subscribe(() => undefined);
    off();
    off(); // idempotent
    const built = tasks.loadCalls;
    tasks.events.emit({ type: 'admitted', taskId: 'x' });
    await new Promise((r) => setTimeout(r, 100));
    expect(tasks.loadCalls).toBe(built);
  });

  it('pushes at each bucket end so charts move while nothing else happens', async () => {
    const { feed } = make(systemClock, { bucketMs: 100, minIntervalMs: 10 });
    const got: DashboardSnapshot[] = [];
    feed.subscribe((s) => got.push(s));
    await waitFor(() => got.length >= 3, 5000, 'snapshots at bucket ends');
    const lengths = got.map((s) => s.throughput.length);
    expect(lengths[2]).toBeGreaterThan(lengths[0] ?? 0);
  });

  it('close(): idempotent, unsubscribes from its sources, no notification after it', async () => {
    const { registry, tasks, feed } = make(systemClock, { minIntervalMs: 10 });
    const got: DashboardSnapshot[] = [];
    feed.subscribe((s) => got.push(s));
    tasks.events.emit({ type: 'admitted', taskId: 'x' }); // a notification pending
    const first = feed.close();
    expect(feed.close()).toBe(first);
    await first;
    expect(feed.state).toBe('closed');
    expect(tasks.events.observed).toBe(false);
    registry.register({
      node_id: 'n1',
      machine_id: 'h',
      address: 'http://127.0.0.1:9',
      version: 'x',
      pools: [],
      capabilities: { gpus: [], cpu_cores: 1, ram_total_bytes: 1 },
    });
    await new Promise((r) => setTimeout(r, 100));
    expect(got).toHaveLength(0);
    expect(feed.subscribe(() => undefined)).toBeTypeOf('function');
  });
});
