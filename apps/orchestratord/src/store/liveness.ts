/**
 * Liveness arithmetic shared by both node stores (and the same as `registry/node-registry.ts`):
 * a node is late once more than 3 intervals passed since it was last seen.
 */

/** The most a heartbeat's own timestamp may lag its arrival and still be trusted, ms. */
export function plausibleTransitMs(heartbeatIntervalMs: number): number {
  return Math.min(heartbeatIntervalMs / 4, 1000);
}

/** When the node was last seen: its own timestamp when plausible, else the arrival time. */
export function lastSeenOf(sentAtMs: number | undefined, now: number, heartbeatIntervalMs: number): number {
  return sentAtMs !== undefined && sentAtMs <= now && now - sentAtMs <= plausibleTransitMs(heartbeatIntervalMs)
    ? sentAtMs
    : now;
}

export function isLate(lastSeen: number, now: number, heartbeatIntervalMs: number): boolean {
  return now - lastSeen > 3 * heartbeatIntervalMs;
}
