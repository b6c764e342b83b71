import type { TokenEvent } from '@llama-orch/contracts';
import type { PoolView } from '../registry/pool-view.js';
import type { Clock } from '@llama-orch/daemon-support';
import type { TokenSink } from '../upstream/dispatch-attempt.js';
import type { TaskObserver } from './task-observer.js';
import { acceptedQuiet, type TaskRecord } from './task-record.js';

/** The node took an attempt (streamed or not): the task's first acceptance is observed once. */
export function attemptAccepted(task: TaskRecord, view: PoolView, clock: Clock, observer: TaskObserver): void {
  const first = task.acceptedAt === undefined;
  const now = clock.now();
  task.acceptedAt ??= now;
  task.quiet = acceptedQuiet(task, now);
  observer.accepted(task, view, first);
}

/**
 * Where one attempt's tokens go: straight into the task's frame log, numbered from 0, while the
 * task runs. The first token of the task moves it to `streaming` and is observed (time to first
 * token). Per token: one frame appended, no other allocation. A chat piece's other delta fields
 * (tool calls …) and log probabilities ride on the frame, for both doors.
 */
export function tokenSink(task: TaskRecord, view: PoolView, clock: Clock, observer: TaskObserver): TokenSink {
  return {
    accepted: () => attemptAccepted(task, view, clock, observer),
    token: (ev) => {
      if (task.state !== 'running') return false;
      const data: TokenEvent = { t: ev.t, i: task.tokens };
      if (ev.delta !== undefined) data.delta = ev.delta;
      if (ev.logprobs !== undefined) data.logprobs = ev.logprobs;
      if (task.stream.appendToken(data) === undefined) return false;
      task.tokens += 1;
      if (task.tokens === 1) {
        const now = clock.now();
        task.firstTokenAt = now;
        task.life.setPhase('streaming');
        observer.firstToken(task, view, now);
      }
      return true;
    },
  };
}
