/** What a chart's text alternative says about a series (gaps ignored). */
export interface SeriesSummary {
  /** Last value present. */
  latest: number | undefined;
  peak: number | undefined;
  mean: number | undefined;
  /** Values present. */
  count: number;
}

export function summarize(values: ReadonlyArray<number | undefined>): SeriesSummary {
  const present = values.filter((v): v is number => v !== undefined && Number.isFinite(v));
  if (present.length === 0) return { latest: undefined, peak: undefined, mean: undefined, count: 0 };
  return {
    latest: present[present.length - 1],
    peak: Math.max(...present),
    mean: present.reduce((a, b) => a + b, 0) / present.length,
    count: present.length,
  };
}

const r1 = (n: number): string => String(Math.round(n * 10) / 10);

/**
 * SVG path data of a sparkline: one x step per value across `width`, y scaled so the peak touches
 * the top (a zero-only series lies on the baseline). A missing value (a bucket without a TTFT)
 * breaks the line rather than drawing it down to zero; a lone point becomes a zero-length segment
 * (drawn as a dot by a round line cap).
 */
export function sparklinePath(
  values: ReadonlyArray<number | undefined>,
  width: number,
  height: number,
  pad = 2,
): string {
  const peak = summarize(values).peak ?? 0;
  const scale = peak > 0 ? (height - 2 * pad) / peak : 0;
  const step = values.length > 1 ? width / (values.length - 1) : 0;
  const parts: string[] = [];
  let pen = false;
  values.forEach((v, i) => {
    if (v === undefined || !Number.isFinite(v)) {
      pen = false;
      return;
    }
    const x = values.length > 1 ? i * step : width / 2;
    const y = height - pad - v * scale;
    const next = values[i + 1];
    const isolated = !pen && (next === undefined || !Number.isFinite(next));
    parts.push(`${pen ? 'L' : 'M'}${r1(x)},${r1(y)}${isolated ? 'h0' : ''}`);
    pen = true;
  });
  return parts.join(' ');
}
