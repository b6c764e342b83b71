/**
 * A small reader of the Prometheus text exposition format (version 0.0.4), enough for what the
 * daemons scrape (llama-server's `/metrics`) and for the tests that check our own `/metrics`.
 *
 * Lines it does not understand are skipped and counted (`skipped`), never thrown on: one odd line
 * from a newer engine must not cost the other series.
 */

export type PromType = 'counter' | 'gauge' | 'histogram' | 'summary' | 'untyped';

export interface PromSample {
  /** The sample's own name (`x_bucket`, `x_sum`, `x_count` for a histogram `x`). */
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

export interface PromFamily {
  readonly name: string;
  readonly type: PromType;
  readonly help: string;
  readonly samples: PromSample[];
}

export interface PromText {
  /** In order of first appearance; a family declared by `# TYPE` is listed even with no samples. */
  readonly families: PromFamily[];
  /** Lines that were neither a comment nor a valid sample. */
  readonly skipped: number;
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*/;
const TYPES = new Set<string>(['counter', 'gauge', 'histogram', 'summary', 'untyped']);

/** Suffixes of the samples that belong to a histogram or summary family. */
function familyOf(sample: string, types: ReadonlyMap<string, PromType>): string {
  for (const suffix of ['_bucket', '_sum', '_count']) {
    if (!sample.endsWith(suffix)) continue;
    const base = sample.slice(0, -suffix.length);
    const t = types.get(base);
    if (t === 'histogram' || (t === 'summary' && suffix !== '_bucket')) return base;
  }
  return sample;
}

function parseValue(s: string): number | undefined {
  if (s === '+Inf' || s === 'Inf') return Infinity;
  if (s === '-Inf') return -Infinity;
  if (s === 'NaN') return NaN;
  if (!/^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(s)) return undefined;
  return Number(s);
}

function unescape(s: string): string {
  return s.replace(/\\(.)/g, (_m, c: string) => (c === 'n' ? '\n' : c));
}

/** `{a="x",b="y"}` at the start of `s`: the labels and the rest of the line, or undefined. */
function parseLabels(s: string): { labels: Record<string, string>; rest: string } | undefined {
  const labels: Record<string, string> = {};
  let i = 1;
  for (;;) {
    while (s[i] === ' ' || s[i] === ',') i += 1;
    if (s[i] === '}') return { labels, rest: s.slice(i + 1) };
    const name = LABEL_NAME.exec(s.slice(i))?.[0];
    if (name === undefined) return undefined;
    i += name.length;
    while (s[i] === ' ') i += 1;
    if (s[i] !== '=' || s[i + 1] !== '"') return undefined;
    i += 2;
    let value = '';
    for (;;) {
      const c = s[i];
      if (c === undefined || c === '\n') return undefined;
      i += 1;
      if (c === '"') break;
      if (c === '\\') {
        const next = s[i];
        if (next === undefined) return undefined;
        value += next === 'n' ? '\n' : next;
        i += 1;
      } else {
        value += c;
      }
    }
    labels[name] = value;
  }
}

function parseSample(line: string): PromSample | undefined {
  const name = NAME.exec(line)?.[0];
  if (name === undefined) return undefined;
  let rest = line.slice(name.length);
  let labels: Record<string, string> = {};
  if (rest.startsWith('{')) {
    const parsed = parseLabels(rest);
    if (parsed === undefined) return undefined;
    ({ labels, rest } = parsed);
  }
  // Value, then an optional timestamp (ignored).
  const fields = rest.trim().split(/\s+/);
  if (fields.length < 1 || fields.length > 2 || fields[0] === '') return undefined;
  const value = parseValue(fields[0] ?? '');
  if (value === undefined) return undefined;
  return { name, labels, value };
}

export function parsePrometheusText(text: string): PromText {
  const types = new Map<string, PromType>();
  const helps = new Map<string, string>();
  const families = new Map<string, PromFamily>();
  let skipped = 0;
  const family = (name: string): PromFamily => {
    let f = families.get(name);
    if (f === undefined) {
      f = { name, type: types.get(name) ?? 'untyped', help: helps.get(name) ?? '', samples: [] };
      families.set(name, f);
    }
    return f;
  };
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '') continue;
    if (line.startsWith('#')) {
      const m = /^#\s*(HELP|TYPE)\s+([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\s+(.*))?$/.exec(line);
      if (m === null) continue; // a plain comment
      const [, kind, name = '', arg = ''] = m;
      if (kind === 'TYPE') {
        if (!TYPES.has(arg)) {
          skipped += 1;
          continue;
        }
        types.set(name, arg as PromType);
        const f = family(name);
        if (f.type !== arg) families.set(name, { ...f, type: arg as PromType });
      } else {
        helps.set(name, unescape(arg));
        const f = families.get(name);
        if (f !== undefined) families.set(name, { ...f, help: unescape(arg) });
      }
      continue;
    }
    const sample = parseSample(line);
    if (sample === undefined) {
      skipped += 1;
      continue;
    }
    family(familyOf(sample.name, types)).samples.push(sample);
  }
  return { families: [...families.values()], skipped };
}
