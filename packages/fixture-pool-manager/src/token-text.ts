/**
 * What the FIXTURE's tokens say, and when the first one comes.
 *
 * - `words`: `tok{i} ` — readable text for tests that assert on what reached the client; the first
 *   token after one full interval, so a test's timing does not depend on chance.
 * - `clock`: the fixture's `process.hrtime.bigint()` at send time, in decimal nanoseconds
 *   (CLOCK_MONOTONIC, shared by every process of the machine), so a benchmark client computes the
 *   delivery delay fixture → client frame; the first token after a random fraction of the interval,
 *   so many streams' tokens spread evenly over the period instead of arriving in bursts.
 */
export type TokenText = 'words' | 'clock';

/** The text of token `i`, taken at the moment it is sent. */
export function tokenText(kind: TokenText, i: number): string {
  return kind === 'clock' ? process.hrtime.bigint().toString() : `tok${i} `;
}

/** Milliseconds from the 200 headers to the first token. */
export function firstTokenDelayMs(kind: TokenText, intervalMs: number): number {
  return kind === 'clock' ? Math.random() * intervalMs : intervalMs;
}

/**
 * The NDJSON line of a plain token event, byte for byte what `JSON.stringify({ type: 'token', t, i })`
 * writes, without building and serialising an object per token (the benchmarks send thousands a
 * second). `t` must need no JSON escaping: both token texts are digits, letters and a space.
 */
export function tokenLine(t: string, i: number): string {
  return `{"type":"token","t":"${t}","i":${i}}\n`;
}
