import type { PoolView } from '../registry/pool-view.js';
import type { Clock } from '@llama-orch/daemon-support';
import type { AnswerSink } from '../upstream/answer-attempt.js';
import type { TaskObserver } from './task-observer.js';
import { attemptAccepted } from './token-sink.js';
import type { TaskRecord } from './task-record.js';

/**
 * Where a non-streamed attempt's answer goes: onto the task record, read by the /v1 door when the
 * task's `end` frame is written. Its tokens count as relayed (the dashboard's throughput) from the
 * moment the answer arrives; there is no first token to observe.
 */
export function answerSink(task: TaskRecord, view: PoolView, clock: Clock, observer: TaskObserver): AnswerSink {
  return {
    accepted: () => attemptAccepted(task, view, clock, observer),
    answer: (ev) => {
      if (task.state !== 'running') return false;
      task.answer = ev;
      task.tokens = ev.tokens_out;
      return true;
    },
  };
}
