import { setTimeout as sleep } from 'node:timers/promises';
import type { Log } from '@llama-orch/daemon-support';
import type { TaskService } from './task-service.js';

/** How a replica drains before it closes (config `drain_grace_ms`, `drain_delay_ms`). */
export interface DrainOptions {
  /** Longest the drain takes, ms; 0 = none. */
  graceMs: number;
  /** Admission stays open this long, ms (the balancer's time to see /readyz fail); capped by `graceMs`. */
  delayMs: number;
}

export interface DrainOutcome {
  /** True when every task admitted here ended within the grace. */
  drained: boolean;
  /** How long the drain took, ms. */
  ms: number;
}

/**
 * First `delayMs` (capped by `graceMs`) with admission still open: a balancer that has not yet
 * seen /readyz fail still sends requests, and refusing them would fail requests another replica
 * would have taken. Then admission stops (a client or balancer that keeps sending gets the
 * retriable `shutting down` error, so new work cannot stretch the drain) and the tasks admitted
 * here run to their end, until the grace is over.
 */
export async function drainTasks(tasks: TaskService, o: DrainOptions, log: Log): Promise<DrainOutcome> {
  const start = performance.now();
  if (o.graceMs <= 0) {
    tasks.stopAdmission();
    return { drained: false, ms: 0 };
  }
  log.info(
    {
      grace_ms: o.graceMs,
      delay_ms: o.delayMs,
      human: `draining: not ready, still serving; finishing the tasks admitted here (at most ${o.graceMs} ms)`,
    },
    'draining',
  );
  await sleep(Math.min(o.delayMs, o.graceMs));
  tasks.stopAdmission();
  const drained = await tasks.drained(Math.max(0, o.graceMs - (performance.now() - start)));
  const ms = Math.round(performance.now() - start);
  if (drained) log.info({ ms, human: `drained in ${ms} ms` }, 'drained');
  else log.warn({ ms, grace_ms: o.graceMs }, 'drain grace over: the tasks left end with an error');
  return { drained, ms };
}
