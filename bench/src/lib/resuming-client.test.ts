import { describe, expect, it } from 'vitest';
import { indexFaults } from './resuming-client.js';

describe('indexFaults', () => {
  it('counts a missing token index as a gap and a repeated one as a duplicate', () => {
    expect(indexFaults([0, 1, 2, 3])).toEqual({ gaps: 0, duplicates: 0 });
    expect(indexFaults([0, 1, 3, 4])).toEqual({ gaps: 1, duplicates: 0 });
    expect(indexFaults([0, 1, 2, 2, 3])).toEqual({ gaps: 0, duplicates: 1 });
    // a resume that went back two frames and skipped one later
    expect(indexFaults([0, 1, 2, 1, 2, 4])).toEqual({ gaps: 1, duplicates: 2 });
    expect(indexFaults([])).toEqual({ gaps: 0, duplicates: 0 });
  });
});
