import type { AdmissionQueue } from '../admission/admission-queue.js';
import { predictClusterWait } from '../admission/prediction.js';
import type { Predictor } from '../admission/predictor.js';
import type { NodeRegistry } from '../registry/node-registry.js';
import type { TaskRecord } from './task-record.js';

/** The admission queue and the running tasks now, for overviews (the dashboard). */
export interface TaskLoad {
  readonly depth: Record<'interactive' | 'batch', number>;
  readonly capacity: number;
  /** Tasks with an attempt in flight. */
  readonly running: number;
  /** Predicted start of a new interactive task, ms, for the model that would wait longest (see `predictClusterWait`). */
  readonly predictedWaitMs: number;
}

export interface TaskLoadInput {
  readonly queue: AdmissionQueue<TaskRecord>;
  readonly running: ReadonlySet<TaskRecord>;
  readonly predictor: Predictor;
  readonly registry: NodeRegistry;
  /** Expected tokens of the new task the wait is predicted for. */
  readonly expectedTokens: number;
}

export function taskLoad({ queue, running, predictor, registry, expectedTokens }: TaskLoadInput): TaskLoad {
  return {
    depth: { interactive: queue.sizeOf('interactive'), batch: queue.sizeOf('batch') },
    capacity: queue.capacity,
    running: running.size,
    predictedWaitMs: predictClusterWait({
      predictor,
      pools: registry.pools(),
      poolsForModel: (m) => registry.poolsForModel(m),
      ahead: (m) => queue.countAhead(m, 'interactive'),
      tokens: expectedTokens,
    }),
  };
}

/**
 * Token frames relayed to clients since start, read on demand: the ended tasks' total plus the
 * running tasks' own counters, so relaying a token costs nothing beyond the task's counter. Never
 * decreases: a task leaves the running sum (state `ended`) in the same call that adds its tokens
 * to the ended total, and no token is relayed after a task ended.
 */
export function tokensRelayed(endedTotal: number, running: ReadonlySet<TaskRecord>): number {
  let n = endedTotal;
  for (const task of running) if (task.state !== 'ended') n += task.tokens;
  return n;
}
