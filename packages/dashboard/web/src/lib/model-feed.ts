import type { DashboardSnapshot } from '@llama-orch/contracts';

export type DashboardModelEvent = DashboardSnapshot['model_events'][number];

const WHAT: Record<DashboardModelEvent['kind'], string> = {
  load_started: 'load started',
  load_ready: 'loaded',
  load_failed: 'load failed',
  load_vanished: 'left before ready',
  unloading: 'unloading',
};

const CAUSE: Record<NonNullable<DashboardModelEvent['cause']>, string> = {
  operator: 'operator',
  idle: 'idle ttl',
  eviction: 'eviction',
  swap: 'swap',
};

/** What happened, in a few words: `load started`, `load failed`, `unloading (idle ttl)`. */
export function describeModelEvent(e: DashboardModelEvent): string {
  const what = WHAT[e.kind];
  return e.kind === 'unloading' && e.cause !== undefined ? `${what} (${CAUSE[e.cause]})` : what;
}

/** The badge class of an event: ready green, failures red, the rest neutral or pending. */
export function modelEventTone(e: DashboardModelEvent): 'ok' | 'bad' | 'pending' | 'idle' {
  if (e.kind === 'load_ready') return 'ok';
  if (e.kind === 'load_failed' || e.kind === 'load_vanished') return 'bad';
  if (e.kind === 'load_started') return 'pending';
  return 'idle';
}
