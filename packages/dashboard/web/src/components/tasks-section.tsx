import type { DashboardSnapshot, DashboardTask } from '@llama-orch/contracts';
import { formatAgo, formatDuration, shortId } from '../lib/format.js';
import { TableHead } from './table-head.js';

/** Rows shown; the snapshot may carry more. */
const MAX_ROWS = 50;

function outcome(t: DashboardTask): string {
  if (t.outcome === 'error') return t.code ? `error: ${t.code}` : 'error';
  return t.outcome;
}

export function TasksSection({ snapshot }: { snapshot: DashboardSnapshot }) {
  const tasks = snapshot.recent_tasks.slice(0, MAX_ROWS);
  return (
    <section class="card" aria-labelledby="tasks-heading">
      <h2 id="tasks-heading">Recent tasks</h2>
      {tasks.length === 0 ? (
        <p class="empty">No task has ended yet. Try the playground below.</p>
      ) : (
        <div class="scroll">
          <table>
            <caption>Recent tasks, newest first ({tasks.length})</caption>
            <TableHead
              columns={['Task', 'Model', 'Pool', 'Tokens', 'TTFT', 'Duration', 'Outcome', 'Correlation id', 'Ended']}
            />
            <tbody>
              {tasks.map((t) => (
                <tr key={t.task_id} data-task={t.task_id}>
                  <th scope="row">
                    <code title={t.task_id}>{shortId(t.task_id)}</code>
                  </th>
                  <td>{t.model}</td>
                  <td>{t.pool_id ?? '—'}</td>
                  <td>{t.tokens_out}</td>
                  <td>{formatDuration(t.ttft_ms)}</td>
                  <td>{formatDuration(t.duration_ms)}</td>
                  <td>
                    <span class={`badge outcome-${t.outcome}`}>{outcome(t)}</span>
                  </td>
                  <td>
                    <code>{t.correlation_id}</code>
                  </td>
                  <td>{formatAgo(t.ended_at_ms, snapshot.generated_at_ms)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}
