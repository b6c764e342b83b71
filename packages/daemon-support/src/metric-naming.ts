import type { PromFamily } from './prom-text.js';

/**
 * The naming rules of our `/metrics` (prometheus.io "Metric and label naming"), as a check the
 * daemons' tests run over a real scrape. Returns one line per problem; none = conforming.
 */
export interface MetricNamingRules {
  /** Every family of ours starts with it. @default 'llorch_' */
  prefix?: string;
  /**
   * Families of the standard process and runtime collectors (prom-client's default metrics), kept
   * under their conventional names. @default ['process_', 'nodejs_']
   */
  standardPrefixes?: readonly string[];
  /** A histogram or summary name must end in one of these (base units). @default ['_seconds', '_bytes'] */
  distributionUnits?: readonly string[];
  /** Label names ending in `_id` that are bounded (fleet-sized). @default ['pool_id', 'node_id', 'replica_id'] */
  boundedIdLabels?: readonly string[];
  /** Families under this prefix must carry each of these labels on every sample. */
  requiredLabels?: { prefix: string; labels: readonly string[] };
}

/** Units that are not base units: a name must say seconds or bytes instead. */
const NON_BASE_UNITS =
  /(^|_)(ms|msec|millis|milliseconds|us|usec|microseconds|ns|nanoseconds|minutes|hours|days|kb|mb|gb|kib|mib|gib|kilobytes|megabytes|gigabytes|percent)(_|$)/;
/** Labels that identify one request, task or session: unbounded cardinality. */
const PER_REQUEST_LABEL = /^(task|request|req|correlation|session|trace|span|conversation|message|prompt)(_?id)?$|^id$/;
/** A label value that looks like a generated id (UUID, or a long hex string). */
const ID_LIKE_VALUE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$|^[0-9a-f]{24,}$/i;

export function metricNamingProblems(families: readonly PromFamily[], rules: MetricNamingRules = {}): string[] {
  const prefix = rules.prefix ?? 'llorch_';
  const standard = rules.standardPrefixes ?? ['process_', 'nodejs_'];
  const units = rules.distributionUnits ?? ['_seconds', '_bytes'];
  const boundedIds = new Set(rules.boundedIdLabels ?? ['pool_id', 'node_id', 'replica_id']);
  const problems: string[] = [];
  for (const f of families) {
    const n = f.name;
    const isStandard = standard.some((p) => n.startsWith(p));
    if (!/^[a-zA-Z_][a-zA-Z0-9_]*$/.test(n))
      problems.push(`${n}: not a valid metric name (colons are for recording rules)`);
    if (!n.startsWith(prefix) && !isStandard) problems.push(`${n}: does not start with ${prefix}`);
    if (f.type === 'counter' && !n.endsWith('_total')) problems.push(`${n}: a counter must end in _total`);
    if (f.type !== 'counter' && n.endsWith('_total')) {
      problems.push(`${n}: only counters end in _total (this is a ${f.type})`);
    }
    if ((f.type === 'histogram' || f.type === 'summary') && !units.some((u) => n.endsWith(u))) {
      problems.push(`${n}: a ${f.type} must be in a base unit (${units.join(', ')})`);
    }
    if (NON_BASE_UNITS.test(n)) problems.push(`${n}: not a base unit (use _seconds or _bytes)`);
    if (f.help.trim() === '') problems.push(`${n}: no HELP text`);
    const labelNames = new Set(f.samples.flatMap((s) => Object.keys(s.labels)));
    for (const l of labelNames) {
      if (PER_REQUEST_LABEL.test(l) || (l.endsWith('_id') && !boundedIds.has(l)))
        problems.push(`${n}: label ${l} is unbounded (an id of a task or request)`);
      if (l.startsWith('__')) problems.push(`${n}: label ${l} is reserved`);
    }
    for (const s of f.samples) {
      for (const [l, v] of Object.entries(s.labels)) {
        if (ID_LIKE_VALUE.test(v)) problems.push(`${n}: label ${l}="${v}" looks like a generated id`);
      }
    }
    const required = rules.requiredLabels;
    if (required !== undefined && n.startsWith(required.prefix)) {
      for (const s of f.samples) {
        const missing = required.labels.filter((l) => s.labels[l] === undefined || s.labels[l] === '');
        if (missing.length > 0) problems.push(`${s.name}: sample without ${missing.join(', ')}`);
      }
    }
  }
  return problems;
}
