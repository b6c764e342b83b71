import { describe, expect, it } from 'vitest';
import { overallFraction, parseCmakeProgress } from './progress.js';
import { parseVersionOutput } from './engine-version.js';

describe('cmake progress', () => {
  it('parses Makefile and Ninja progress and ignores other lines', () => {
    expect(parseCmakeProgress('[  7%] Building C object ggml/src/ggml.c.o')).toBe(7);
    expect(parseCmakeProgress('[100%] Built target llama-server')).toBe(100);
    expect(parseCmakeProgress('[17/340] Building CXX object x.o')).toBe(5);
    expect(parseCmakeProgress('-- Configuring done')).toBeUndefined();
    expect(parseCmakeProgress('warning: [ 12%] in the middle')).toBeUndefined();
  });

  it('maps phases onto one monotonic 0..1 engine fraction', () => {
    const seq = [
      overallFraction('source', 0),
      overallFraction('configure', 0.5),
      overallFraction('build', 0),
      overallFraction('build', 0.5),
      overallFraction('build', 1),
      overallFraction('verify', 1),
    ];
    expect(seq).toEqual([...seq].sort((a, b) => a - b));
    expect(seq[0]).toBe(0);
    expect(overallFraction('done')).toBe(1);
  });
});

describe('--version output', () => {
  it('parses the identity after the log line', () => {
    const out =
      '0.00.000.419 I srv  llama_server: initializing ...\nversion: 0.5.0-dev (build 1, commit de3ff81)\nbuilt with GNU 12.2.0 for Linux x86_64\n';
    expect(parseVersionOutput(out)).toEqual({
      engineVersion: '0.5.0-dev (build 1, commit de3ff81)',
      versionOutput: 'version: 0.5.0-dev (build 1, commit de3ff81)\nbuilt with GNU 12.2.0 for Linux x86_64',
    });
    expect(parseVersionOutput('usage: foo')).toBeUndefined();
  });
});
