import { describe, expect, it } from 'vitest';
import { sampleSnapshot } from '../testing/sample-snapshot.js';
import { MalformedSnapshotError, parseSnapshot } from './snapshot.js';

describe('parseSnapshot', () => {
  it('reads a snapshot with its replicas', () => {
    const s = sampleSnapshot();
    expect(parseSnapshot(JSON.stringify(s))).toEqual(s);
  });

  it('a snapshot without `replicas` (an older replica) shows none instead of failing', () => {
    const { replicas: _dropped, ...older } = sampleSnapshot();
    expect(parseSnapshot(JSON.stringify(older)).replicas).toEqual([]);
  });

  it('a snapshot without `model_events` (a replica before models on demand) shows an empty feed', () => {
    const { model_events: _dropped, ...older } = sampleSnapshot();
    expect(parseSnapshot(JSON.stringify(older)).model_events).toEqual([]);
  });

  it('anything else missing is malformed', () => {
    const { nodes: _dropped, ...broken } = sampleSnapshot();
    expect(() => parseSnapshot(JSON.stringify(broken))).toThrow(MalformedSnapshotError);
  });
});
