import type { DashboardSnapshot } from '@llama-orch/contracts';
import { formatAgo, plural } from '../lib/format.js';
import { TableHead } from './table-head.js';

/**
 * The orchestratord replicas sharing the cluster store (one without a store). Whichever replica
 * the page talks to, the rest of the page is the whole cluster's; this says which ones there are.
 */
export function ReplicasSection({ snapshot }: { snapshot: DashboardSnapshot }) {
  const now = snapshot.generated_at_ms;
  const replicas = snapshot.replicas;
  return (
    <section class="card" aria-labelledby="replicas-heading">
      <h2 id="replicas-heading">Replicas</h2>
      {replicas.length === 0 ? (
        <p class="empty">No replica has announced itself yet (the cluster store may be unreachable).</p>
      ) : (
        <div class="scroll">
          <table>
            <caption>{plural(replicas.length, 'orchestratord replica')}</caption>
            <TableHead columns={['Replica', 'Address', 'Version', 'Up since', 'Tasks relayed', 'Streams now']} />
            <tbody>
              {replicas.map((r) => (
                <tr key={r.replica_id} data-replica={r.replica_id}>
                  <th scope="row">{r.replica_id}</th>
                  <td>
                    <code>{r.address}</code>
                  </td>
                  <td>{r.version}</td>
                  <td>
                    <time dateTime={new Date(r.up_since_ms).toISOString()}>{formatAgo(r.up_since_ms, now)}</time>
                  </td>
                  <td data-stat="tasks-relayed">{r.tasks_relayed}</td>
                  <td data-stat="load">{r.load}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}
