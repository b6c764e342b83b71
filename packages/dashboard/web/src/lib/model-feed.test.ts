import { describe, expect, it } from 'vitest';
import { describeModelEvent, modelEventTone, type DashboardModelEvent } from './model-feed.js';

const at = (over: Partial<DashboardModelEvent>): DashboardModelEvent => ({
  at_ms: 0,
  kind: 'load_started',
  model: 'm',
  node_id: 'n1',
  pool_id: 'p',
  ...over,
});

describe('model feed', () => {
  it('says what happened, and for an unload why', () => {
    expect(describeModelEvent(at({ kind: 'load_started' }))).toBe('load started');
    expect(describeModelEvent(at({ kind: 'load_ready' }))).toBe('loaded');
    expect(describeModelEvent(at({ kind: 'load_failed', detail: 'exit 1' }))).toBe('load failed');
    expect(describeModelEvent(at({ kind: 'load_vanished' }))).toBe('left before ready');
    expect(describeModelEvent(at({ kind: 'unloading', cause: 'operator' }))).toBe('unloading (operator)');
    expect(describeModelEvent(at({ kind: 'unloading', cause: 'idle' }))).toBe('unloading (idle ttl)');
    expect(describeModelEvent(at({ kind: 'unloading', cause: 'eviction' }))).toBe('unloading (eviction)');
    expect(describeModelEvent(at({ kind: 'unloading', cause: 'swap' }))).toBe('unloading (swap)');
  });

  it('tones: ready ok, failures bad, a load under way pending, unloads neutral', () => {
    expect(modelEventTone(at({ kind: 'load_ready' }))).toBe('ok');
    expect(modelEventTone(at({ kind: 'load_failed' }))).toBe('bad');
    expect(modelEventTone(at({ kind: 'load_vanished' }))).toBe('bad');
    expect(modelEventTone(at({ kind: 'load_started' }))).toBe('pending');
    expect(modelEventTone(at({ kind: 'unloading', cause: 'idle' }))).toBe('idle');
  });
});
