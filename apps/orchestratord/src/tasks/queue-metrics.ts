import type { MetricsEvent } from '@llama-orch/contracts';
import type { QueueEntry } from '../admission/admission-queue.js';
import { modelAvailability, provisioningProgress } from '../admission/model-availability.js';
import { predictTask } from '../admission/prediction.js';
import { onTimeProbability, type Predictor } from '../admission/predictor.js';
import type { NodeRegistry } from '../registry/node-registry.js';
import type { PoolView } from '../registry/pool-view.js';
import type { TaskRecord } from './task-record.js';

export interface MetricsFrameInput {
  readonly task: TaskRecord;
  readonly views: readonly PoolView[];
  readonly predictor: Predictor;
  /** Tasks queued cluster-wide. */
  readonly depth: number;
  /** Position in the queue; undefined once dispatched. */
  readonly position: number | undefined;
  /** Tasks for the same model ahead of it. */
  readonly ahead: number;
  readonly now: number;
}

/**
 * The plain and verbose payloads of one `metrics` frame for a waiting task, and the phase it is
 * in (`preparing` while its model is only being provisioned). The verbose payload is the plain one
 * with `phase`, `human` (and `prep`) added by `Object.assign`, so both have a fixed shape.
 */
export function metricsFrame(input: MetricsFrameInput): {
  data: MetricsEvent;
  verbose: MetricsEvent;
  phase: TaskRecord['phase'];
} {
  const { task, position } = input;
  const avail = modelAvailability(input.views, task.request.model_ref);
  const listed = [...avail.ready, ...avail.provisioning];
  const prediction =
    position === undefined ? undefined : predictTask(input.predictor, task.request, input.ahead, listed);
  const waitMs = prediction?.startMs ?? 0;
  const needMs = prediction?.finishMs ?? waitMs;
  const data: MetricsEvent = {
    queue_depth: input.depth,
    on_time_probability: onTimeProbability(task.deadlineAt - input.now, needMs),
  };
  if (position !== undefined) data.queue_position = position;
  const preparing = avail.ready.length === 0 && avail.provisioning.length > 0;
  const phase: TaskRecord['phase'] = task.state === 'queued' ? (preparing ? 'preparing' : 'queued') : task.phase;
  let human: string;
  if (task.state === 'running' && task.placement !== undefined) {
    human = `Dispatched to pool ${task.placement.pool_id} on node ${task.placement.node_id}; waiting for the first token`;
  } else if (preparing) {
    const pct = Math.round((provisioningProgress(avail.provisioning) ?? 0) * 100);
    human = `Waiting for '${task.request.model_ref}' to be provisioned (${pct}% done); position ${position ?? 0} in the queue`;
  } else {
    human = `Queued at position ${position ?? 0} of ${input.depth}; predicted start in about ${Math.round(waitMs / 100) / 10} s`;
  }
  const verbose: MetricsEvent = Object.assign({}, data, { phase, human });
  const prep = preparing ? provisioningProgress(avail.provisioning) : undefined;
  if (prep !== undefined) verbose.prep = prep;
  return { data, verbose, phase };
}

export interface QueueMetricsOptions {
  registry: NodeRegistry;
  predictor: Predictor;
  /** Period of `metrics` frames while a task waits, ms. */
  intervalMs: number;
  /** Whether dispatched tasks get `metrics` frames until their first token. @default true */
  runningFrames?: boolean;
}

/**
 * `metrics` frames for tasks that wait: queued ones on a change of position and every
 * `intervalMs`, dispatched ones every `intervalMs` until their first token (unless
 * `runningFrames` is off: with a Redis store a dispatch fixes its first token's frame id). A frame reads only the
 * pools of its task's model (one registry index lookup, no scan).
 */
export class QueueMetrics {
  readonly #registry: NodeRegistry;
  readonly #predictor: Predictor;
  readonly #intervalMs: number;
  readonly #runningFrames: boolean;

  constructor({ registry, predictor, intervalMs, runningFrames = true }: QueueMetricsOptions) {
    this.#registry = registry;
    this.#predictor = predictor;
    this.#intervalMs = intervalMs;
    this.#runningFrames = runningFrames;
  }

  /** With `positionChangesOnly`, only queued tasks whose position changed get a frame. */
  emit(
    queue: Iterable<QueueEntry<TaskRecord>> & { readonly size: number },
    running: ReadonlySet<TaskRecord>,
    positionChangesOnly: boolean,
    now: number,
  ): void {
    const runningToo = !positionChangesOnly && this.#runningFrames;
    if (queue.size === 0 && (!runningToo || running.size === 0)) return;
    const depth = queue.size;
    const aheadByModel = new Map<string, number>();
    let position = 0;
    for (const entry of queue) {
      const task = entry.item;
      const model = task.request.model_ref;
      const ahead = aheadByModel.get(model) ?? 0;
      aheadByModel.set(model, ahead + 1);
      const changed = task.lastPosition !== position;
      if (changed || (!positionChangesOnly && now - task.lastMetricsAt >= this.#intervalMs)) {
        this.#emitOne(task, depth, position, ahead, now);
      }
      position += 1;
    }
    if (!runningToo) return;
    for (const task of running) {
      if (task.tokens === 0 && now - task.lastMetricsAt >= this.#intervalMs)
        this.#emitOne(task, depth, undefined, 0, now);
    }
  }

  #emitOne(task: TaskRecord, depth: number, position: number | undefined, ahead: number, now: number): void {
    const views = this.#registry.poolsForModel(task.request.model_ref);
    const { data, verbose, phase } = metricsFrame({
      task,
      views,
      predictor: this.#predictor,
      depth,
      position,
      ahead,
      now,
    });
    task.life.setPhase(phase);
    task.stream.append({ event: 'metrics', data }, { event: 'metrics', data: verbose });
    task.lastPosition = position;
    task.lastMetricsAt = now;
  }
}
