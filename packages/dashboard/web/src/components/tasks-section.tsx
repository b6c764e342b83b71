import { useState } from 'preact/hooks';
import type { DashboardSnapshot, DashboardTask } from '@llama-orch/contracts';
import type { ApiClient } from '../lib/api.js';
import { formatAgo, formatDuration, shortId } from '../lib/format.js';
import { TableHead } from './table-head.js';
import { TaskDialog } from './task-dialog.js';

/** Rows shown; the snapshot may carry more. */
const MAX_ROWS = 50;

function outcome(t: DashboardTask): string {
  if (t.outcome === 'error') return t.code ? `error: ${t.code}` : 'error';
  return t.outcome;
}

export function TasksSection({ snapshot, api }: { snapshot: DashboardSnapshot; api: ApiClient }) {
  const tasks = snapshot.recent_tasks.slice(0, MAX_ROWS);
  // the task whose record is open; the dialog stays when newer tasks push its row off the list
  const [open, setOpen] = useState<string | undefined>(undefined);
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
                    <button
                      type="button"
                      class="link"
                      aria-haspopup="dialog"
                      aria-label={`Task ${t.task_id}`}
                      title={t.task_id}
                      onClick={() => setOpen(t.task_id)}
                    >
                      <code>{shortId(t.task_id)}</code>
                    </button>
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
      {open !== undefined ? <TaskDialog key={open} taskId={open} api={api} onClose={() => setOpen(undefined)} /> : null}
    </section>
  );
}
