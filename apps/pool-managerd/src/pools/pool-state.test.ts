import { describe, expect, it } from 'vitest';
import { InvalidTransitionError, PoolBusyError } from '../errors.js';
import { PoolStateMachine, canTransition } from './pool-state.js';

describe('PoolStateMachine', () => {
  it('walks the happy path with reasons and notifies listeners', () => {
    const m = new PoolStateMachine('p', 'provisioning', 'waiting');
    const seen: string[] = [];
    m.onChange((c) => seen.push(`${c.from}>${c.to}:${c.reason ?? ''}`));
    m.transition('starting', 'spawned');
    m.transition('ready', 'healthy');
    m.transition('draining', 'drain');
    m.transition('stopped', 'drained');
    expect(m.state).toBe('stopped');
    expect(m.reason).toBe('drained');
    expect(seen).toEqual([
      'provisioning>starting:spawned',
      'starting>ready:healthy',
      'ready>draining:drain',
      'draining>stopped:drained',
    ]);
  });

  it('allows crash restart, breaker and reload paths', () => {
    expect(canTransition('ready', 'starting')).toBe(true); // engine exited
    expect(canTransition('starting', 'failed')).toBe(true); // breaker open
    expect(canTransition('failed', 'starting')).toBe(true); // half-open trial
    expect(canTransition('draining', 'provisioning')).toBe(true); // reload fetches a model
    expect(canTransition('draining', 'ready')).toBe(true); // reload rolled back
    expect(canTransition('stopped', 'ready')).toBe(true); // external engine adopted
  });

  it('rejects transitions that skip the engine start', () => {
    expect(canTransition('provisioning', 'ready')).toBe(false);
    expect(canTransition('starting', 'provisioning')).toBe(false);
    expect(canTransition('stopped', 'failed')).toBe(false);
    const m = new PoolStateMachine('p', 'provisioning');
    expect(() => m.transition('ready')).toThrow(InvalidTransitionError);
    expect(m.state).toBe('provisioning');
  });

  it('lets every state drain for an unload (a load still coming up is abandoned), then stop', () => {
    for (const from of ['provisioning', 'starting', 'ready', 'failed', 'stopped'] as const) {
      const m = new PoolStateMachine('p', from);
      m.begin('unload');
      m.transition('draining', 'unloading');
      m.transition('stopped', 'unloaded');
      expect(m.state).toBe('stopped');
    }
  });

  it('holds one operation at a time; shutdown supersedes and stays', () => {
    const m = new PoolStateMachine('p', 'ready');
    m.begin('drain');
    expect(() => m.begin('reload')).toThrow(PoolBusyError);
    expect(m.operation).toBe('drain');
    m.begin('shutdown');
    m.end('drain');
    expect(m.operation).toBe('shutdown');
    expect(() => m.begin('drain')).toThrow(PoolBusyError);
    m.begin('shutdown');
    m.end('shutdown');
    expect(m.operation).toBe('shutdown');
  });
});
