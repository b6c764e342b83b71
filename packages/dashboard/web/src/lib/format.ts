// Pure formatting for the page: every number an operator reads passes through here, so the units
// and roundings are the same in every section (and unit-tested).

const DASH = '—';

/** Bytes in binary units: `512 B`, `1.5 KiB`, `79.6 GiB`. */
export function formatBytes(bytes: number | undefined): string {
  if (bytes === undefined || !Number.isFinite(bytes) || bytes < 0) return DASH;
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = bytes;
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return u === 0 ? `${v} B` : `${v >= 100 ? Math.round(v) : v.toFixed(1)} ${units[u]}`;
}

/** A duration: `850 ms`, `1.2 s`, `42 s`, `3 min 20 s`, `2 h 5 min`. */
export function formatDuration(ms: number | undefined): string {
  if (ms === undefined || !Number.isFinite(ms) || ms < 0) return DASH;
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = ms / 1000;
  if (s < 10) return `${s.toFixed(1)} s`;
  if (s < 60) return `${Math.round(s)} s`;
  const totalS = Math.round(s);
  const min = Math.floor(totalS / 60);
  if (min < 60) return totalS % 60 === 0 ? `${min} min` : `${min} min ${totalS % 60} s`;
  const h = Math.floor(min / 60);
  return min % 60 === 0 ? `${h} h` : `${h} h ${min % 60} min`;
}

/**
 * How long before `nowMs` a moment was: `just now`, `3.4 s ago`, `2 min ago`. `nowMs` is the
 * snapshot's `generated_at_ms` (the server's clock), so a skewed browser clock cannot make a
 * heartbeat look stale or from the future.
 */
export function formatAgo(at: string | number, nowMs: number): string {
  const t = typeof at === 'number' ? at : Date.parse(at);
  if (!Number.isFinite(t)) return DASH;
  const ago = nowMs - t;
  if (ago < 500) return 'just now';
  return `${formatDuration(ago)} ago`;
}

/** A rate with one decimal below 100 (`12.3 tokens/s`), whole above. */
export function formatRate(perSecond: number | undefined, unit = 'tokens/s'): string {
  if (perSecond === undefined || !Number.isFinite(perSecond)) return DASH;
  return `${perSecond >= 100 ? Math.round(perSecond) : perSecond.toFixed(1)} ${unit}`;
}

/** Wall-clock time of day in the browser's zone, `16:52:03`. */
export function formatClock(ms: number): string {
  const d = new Date(ms);
  return [d.getHours(), d.getMinutes(), d.getSeconds()].map((n) => String(n).padStart(2, '0')).join(':');
}

/** The first 8 characters of a UUID-like id (the whole id goes in a `title`). */
export function shortId(id: string): string {
  return id.length > 8 ? id.slice(0, 8) : id;
}

/** `n` of a countable noun: `1 slot`, `3 slots`. */
export function plural(n: number, noun: string): string {
  return `${n} ${noun}${n === 1 ? '' : 's'}`;
}
