import type { DashboardSnapshot } from '@llama-orch/contracts';
import { formatAgo, formatClock } from '../lib/format.js';
import { describeModelEvent, modelEventTone } from '../lib/model-feed.js';
import { TableHead } from './table-head.js';

/**
 * The live feed of models on demand: loads started, ready, failed (with the node's reason) and
 * copies unloading (operator, idle ttl, eviction, swap, with why), newest first, as the
 * orchestratord replica this page talks to started or asked for them.
 */
export function ModelFeedSection({ snapshot }: { snapshot: DashboardSnapshot }) {
  const events = snapshot.model_events;
  const now = snapshot.generated_at_ms;
  return (
    <section class="card" aria-labelledby="model-feed-heading">
      <h2 id="model-feed-heading">Model loads and unloads</h2>
      {events.length === 0 ? (
        <p class="empty">No model has been loaded or unloaded on request through this orchestratord yet.</p>
      ) : (
        <div class="scroll">
          <table>
            <caption>Live feed, newest first ({events.length})</caption>
            <TableHead columns={['When', 'Event', 'Model', 'Node', 'Pool', 'Why']} />
            <tbody>
              {events.map((e, i) => (
                <tr
                  key={`${e.at_ms}-${e.kind}-${e.node_id}-${e.pool_id}-${i}`}
                  data-model-event={e.kind}
                  data-cause={e.cause}
                >
                  <th scope="row">
                    <time dateTime={new Date(e.at_ms).toISOString()} title={formatClock(e.at_ms)}>
                      {formatAgo(e.at_ms, now)}
                    </time>
                  </th>
                  <td>
                    <span class={`badge tone-${modelEventTone(e)}`}>{describeModelEvent(e)}</span>
                  </td>
                  <td>
                    <code>{e.model}</code>
                  </td>
                  <td>{e.node_id}</td>
                  <td>{e.pool_id}</td>
                  {e.detail !== undefined ? (
                    <td class={e.kind === 'load_failed' ? 'error-text' : undefined}>{e.detail}</td>
                  ) : (
                    <td>—</td>
                  )}
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}
