import { sparklinePath, summarize } from '../lib/chart.js';

interface Props {
  id: string;
  title: string;
  values: ReadonlyArray<number | undefined>;
  /** How one value reads (`12.3 tokens/s`). */
  format(v: number | undefined): string;
  /** `over the last 5 min`. */
  window: string;
}

const W = 240;
const H = 48;

/**
 * A small line chart with its text alternative: the caption says what the line shows (now, peak,
 * mean) and the section's data table has every bucket, so the SVG itself is hidden from assistive
 * technology rather than announced twice.
 */
export function Sparkline({ id, title, values, format, window }: Props) {
  const s = summarize(values);
  const summary =
    s.count === 0
      ? `No data ${window}.`
      : `Now ${format(s.latest)}, peak ${format(s.peak)}, mean ${format(s.mean)} ${window}.`;
  return (
    <figure class="spark" aria-labelledby={`${id}-title`}>
      <figcaption id={`${id}-title`}>
        <strong>{title}</strong> <span data-summary>{summary}</span>
      </figcaption>
      <svg viewBox={`0 0 ${W} ${H}`} width={W} height={H} aria-hidden="true" focusable="false">
        <line x1={0} y1={H - 1} x2={W} y2={H - 1} class="axis" />
        <path d={sparklinePath(values, W, H, 3)} class="line" />
      </svg>
    </figure>
  );
}
