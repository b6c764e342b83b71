import { useEffect, useRef, useState } from 'preact/hooks';
import type { ApiClient } from '../lib/api.js';
import { shortId } from '../lib/format.js';
import { fetchTask, taskFacts, type TaskLookup } from '../lib/task-record.js';

/** Where the lookup is: `data-lookup` on the dialog says so (tests wait on it). */
type Lookup = { phase: 'loading' } | { phase: 'error'; message: string } | ({ phase: 'done' } & TaskLookup);

/**
 * A task's record (`GET /v2/tasks/{id}`) in a modal `<dialog>`: fetched once when it opens (the
 * page's key; aborted if it closes first), then state, model, node / pool, outcome, usage and
 * timings as a description list. A 404 — past the retention, or not this key's — says so.
 */
export function TaskDialog({ taskId, api, onClose }: { taskId: string; api: ApiClient; onClose(): void }) {
  const ref = useRef<HTMLDialogElement>(null);
  const [lookup, setLookup] = useState<Lookup>({ phase: 'loading' });

  useEffect(() => {
    const d = ref.current;
    if (d && !d.open) d.showModal();
  }, []);

  useEffect(() => {
    const ac = new AbortController();
    setLookup({ phase: 'loading' });
    fetchTask(api, taskId, ac.signal).then(
      (found) => {
        if (!ac.signal.aborted) setLookup({ phase: 'done', ...found });
      },
      (err: unknown) => {
        if (!ac.signal.aborted)
          setLookup({ phase: 'error', message: err instanceof Error ? err.message : String(err) });
      },
    );
    return () => ac.abort();
  }, [api, taskId]);

  const id = `task-${taskId.replace(/[^A-Za-z0-9_-]/g, '_')}`;
  const state = lookup.phase === 'done' ? lookup.kind : lookup.phase;
  return (
    <dialog ref={ref} class="card task-dialog" aria-labelledby={`${id}-title`} data-lookup={state} onClose={onClose}>
      <h3 id={`${id}-title`}>Task {shortId(taskId)}</h3>
      <p class="muted">
        <code>{taskId}</code>
      </p>
      {lookup.phase === 'loading' ? (
        <p role="status">Loading the task's record…</p>
      ) : lookup.phase === 'error' ? (
        <p class="error" role="alert">
          Could not read the task: {lookup.message}
        </p>
      ) : lookup.kind === 'gone' ? (
        <p role="status" class="task-gone">
          This task's record is expired or not visible: orchestratord keeps records for a while after a task ends, and
          shows a task only to the key that sent it and to operators.
        </p>
      ) : (
        <dl class="facts">
          {taskFacts(lookup.task).map((f) => (
            <div key={f.key} data-fact={f.key}>
              <dt>{f.label}</dt>
              <dd>{f.value}</dd>
            </div>
          ))}
        </dl>
      )}
      <p class="buttons">
        <button type="button" onClick={() => ref.current?.close()}>
          Close
        </button>
      </p>
    </dialog>
  );
}
