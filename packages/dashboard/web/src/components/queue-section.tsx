import type { DashboardSnapshot } from '@llama-orch/contracts';
import { formatDuration } from '../lib/format.js';

export function QueueSection({ snapshot }: { snapshot: DashboardSnapshot }) {
  const q = snapshot.queue;
  return (
    <section class="card" aria-labelledby="queue-heading">
      <h2 id="queue-heading">Admission queue</h2>
      <dl class="stats">
        <div>
          <dt>Interactive waiting</dt>
          <dd data-stat="interactive">{q.depth.interactive}</dd>
        </div>
        <div>
          <dt>Batch waiting</dt>
          <dd data-stat="batch">{q.depth.batch}</dd>
        </div>
        <div>
          <dt>Capacity</dt>
          <dd>{q.capacity}</dd>
        </div>
        <div>
          <dt>Running on pools</dt>
          <dd data-stat="running">{q.running}</dd>
        </div>
        <div>
          <dt>Predicted wait (interactive)</dt>
          <dd>{formatDuration(q.predicted_wait_ms)}</dd>
        </div>
      </dl>
    </section>
  );
}
