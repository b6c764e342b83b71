/**
 * The flood benchmark's verdict on its `DEADLINE_UNMET` refusals: how many of them would have met
 * their deadline had they been admitted, judged from what happened to the tasks admitted around
 * them (one priority, one FIFO queue), on the client's clock.
 *
 * Admissions and refusals are replayed in the order their responses arrived (`t` = that time:
 * admission was decided just before). `tail` is when the task last in the queue ends:
 * - an admitted task sets `tail` to its actual end, delayed by `k × gap` where `k` is the number of
 *   refusals put back in front of it so far (below); a task that did not end normally (expired in
 *   the queue, timed out, failed) makes `tail` infinite: nothing behind it would have made it;
 * - a refusal would have ended at `would_end = max(tail + gap, t + service)` (one finish interval
 *   after the task ahead of it, and no sooner than an unqueued task takes). When `would_end − t ≤
 *   deadline_ms` it is a refusal that would have met its deadline: it is counted, put back in the
 *   queue (`k += 1`, `tail = would_end`) so that the next refusals are judged behind it.
 * `gap` is the run's mean interval between consecutive normal ends of admitted tasks (their span ÷
 * (count − 1)); `service` the median admit → end time of the fastest tenth of them. A refusal
 * before any admission is judged with `tail = −∞` (an empty queue).
 */

export interface AdmittedTask {
  /** Response (admission) time, ms on the run's clock. */
  readonly admittedAt: number;
  /** End frame time, ms; undefined when the task did not end normally. */
  readonly endedAt: number | undefined;
}

export interface RefusalVerdict {
  readonly refusedAt: number;
  /** When it would have ended; Infinity behind a task that never ended normally. */
  readonly wouldEndAt: number;
  readonly wouldHaveMet: boolean;
}

export interface FloodVerdict {
  readonly gapMs: number;
  readonly serviceMs: number;
  readonly verdicts: readonly RefusalVerdict[];
  /** Refusals that would have met their deadline. */
  readonly falseRefusals: number;
}

function median(sorted: readonly number[]): number {
  if (sorted.length === 0) return Number.NaN;
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1
    ? (sorted[mid] as number)
    : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

export function judgeFlood(
  admitted: readonly AdmittedTask[],
  refusedAt: readonly number[],
  deadlineMs: number,
): FloodVerdict {
  const ends = admitted.flatMap((a) => (a.endedAt === undefined ? [] : [a.endedAt])).sort((a, b) => a - b);
  const gapMs = ends.length >= 2 ? ((ends.at(-1) as number) - (ends[0] as number)) / (ends.length - 1) : 0;
  const durations = admitted
    .flatMap((a) => (a.endedAt === undefined ? [] : [a.endedAt - a.admittedAt]))
    .sort((a, b) => a - b);
  const serviceMs = median(durations.slice(0, Math.max(1, Math.ceil(durations.length / 10))));
  // Admissions before refusals at the same instant: the refusal came after the admission's decision.
  const events = [
    ...admitted.map((a) => ({ t: a.admittedAt, admitted: a as AdmittedTask | undefined })),
    ...refusedAt.map((t) => ({ t, admitted: undefined as AdmittedTask | undefined })),
  ].sort((a, b) => a.t - b.t || (a.admitted === undefined ? 1 : 0) - (b.admitted === undefined ? 1 : 0));
  let tail = Number.NEGATIVE_INFINITY;
  let k = 0;
  const verdicts: RefusalVerdict[] = [];
  for (const e of events) {
    if (e.admitted !== undefined) {
      tail = e.admitted.endedAt === undefined ? Number.POSITIVE_INFINITY : e.admitted.endedAt + k * gapMs;
      continue;
    }
    const wouldEndAt = Math.max(tail + gapMs, e.t + (Number.isNaN(serviceMs) ? 0 : serviceMs));
    const wouldHaveMet = wouldEndAt - e.t <= deadlineMs;
    verdicts.push({ refusedAt: e.t, wouldEndAt, wouldHaveMet });
    if (wouldHaveMet) {
      k += 1;
      tail = wouldEndAt;
    }
  }
  return { gapMs, serviceMs, verdicts, falseRefusals: verdicts.filter((v) => v.wouldHaveMet).length };
}
