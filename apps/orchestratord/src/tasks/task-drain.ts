import { setTimeout as sleep } from 'node:timers/promises';
import type { Log } from '@llama-orch/daemon-support';
import type { TaskService } from './task-service.js';

/** How a replica drains before it closes (config `drain_grace_ms`, `drain_delay_ms`). */
export interface DrainOptions {
  /** Longest the drain takes, ms; 0 = none. */
  graceMs: number;
  /** Shortest drain, ms (the balancer's time to see /readyz fail); capped by `graceMs`. */
  delayMs: number;
}

export interface DrainOutcome {
  /** True when every task admitted here ended within the grace. */
  drained: boolean;
  /** How long the drain took, ms. */
  ms: number;
}

/**
 * Waits until the tasks admitted here have ended and at least `delayMs` has passed, at most
 * `graceMs`. Requests go on being served meanwhile: a balancer that has not yet seen /readyz fail
 * still sends some, and refusing them would fail requests that another replica would have taken.
 */
export async function drainTasks(tasks: TaskService, o: DrainOptions, log: Log): Promise<DrainOutcome> {
  const start = performance.now();
  if (o.graceMs <= 0) return { drained: false, ms: 0 };
  log.info({ grace_ms: o.graceMs, delay_ms: o.delayMs, human: `draining: not ready, still serving; finishing the tasks admitted here (at most ${o.graceMs} ms)` }, 'draining');
  const [drained] = await Promise.all([tasks.drained(o.graceMs), sleep(Math.min(o.delayMs, o.graceMs))]);
  const ms = Math.round(performance.now() - start);
  if (drained) log.info({ ms, human: `drained in ${ms} ms` }, 'drained');
  else log.warn({ ms, grace_ms: o.graceMs }, 'drain grace over: the tasks left end with an error');
  return { drained, ms };
}
