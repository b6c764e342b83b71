import type { DashboardSnapshot } from '@llama-orch/contracts';
import { formatClock, formatDuration, formatRate } from '../lib/format.js';
import { Sparkline } from './sparkline.js';
import { TableHead } from './table-head.js';

export function ThroughputSection({ snapshot }: { snapshot: DashboardSnapshot }) {
  const points = snapshot.throughput;
  // the feed starts empty and adds a bucket as each one closes
  const window = points.length === 0 ? 'yet' : `over the last ${formatDuration(points.length * snapshot.bucket_ms)}`;
  return (
    <section class="card" aria-labelledby="throughput-heading">
      <h2 id="throughput-heading">Live throughput</h2>
      <div class="charts">
        <Sparkline
          id="tps"
          title="Tokens per second"
          values={points.map((p) => p.tokens_per_s)}
          format={(v) => formatRate(v)}
          window={window}
        />
        <Sparkline
          id="ttft"
          title="Time to first token (median)"
          values={points.map((p) => p.ttft_p50_ms)}
          format={formatDuration}
          window={window}
        />
      </div>
      <details>
        <summary>
          Data table ({points.length} buckets of {formatDuration(snapshot.bucket_ms)})
        </summary>
        <div class="scroll">
          <table>
            <caption>Throughput per bucket, oldest first</caption>
            <TableHead columns={['From', 'Tokens/s', 'TTFT p50', 'Tasks ended']} />
            <tbody>
              {points.map((p) => (
                <tr key={p.t_ms}>
                  <th scope="row">{formatClock(p.t_ms)}</th>
                  <td>{formatRate(p.tokens_per_s, '')}</td>
                  <td>{formatDuration(p.ttft_p50_ms)}</td>
                  <td>{p.tasks_ended}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      </details>
    </section>
  );
}
