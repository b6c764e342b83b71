import { useEffect, useRef, useState } from 'preact/hooks';
import type { ClusterPool } from '@llama-orch/contracts';
import type { ApiClient } from '../lib/api.js';

export type PoolAction = 'drain' | 'reload';

interface Props {
  action: PoolAction;
  pool: ClusterPool;
  api: ApiClient;
  /** The operation was accepted (202); `message` says so. */
  onDone(message: string): void;
  onCancel(): void;
}

const DEFAULT_DEADLINE_S = 30;

/**
 * The confirmation step of Drain and Reload: a modal `<dialog>` (focus moves into it, Escape
 * cancels) that names the pool, explains what happens, takes the deadline (and for reload the new
 * model ref) and shows orchestratord's refusal if there is one.
 */
export function PoolActionDialog({ action, pool, api, onDone, onCancel }: Props) {
  const ref = useRef<HTMLDialogElement>(null);
  const [deadlineS, setDeadlineS] = useState(String(DEFAULT_DEADLINE_S));
  const [modelRef, setModelRef] = useState(pool.models[0] ?? '');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | undefined>(undefined);

  useEffect(() => {
    const d = ref.current;
    if (d && !d.open) d.showModal();
  }, []);

  const id = `${action}-${pool.pool_id}`;
  const title = action === 'drain' ? `Drain pool ${pool.pool_id}?` : `Reload pool ${pool.pool_id}?`;
  const submit = async (e: Event): Promise<void> => {
    e.preventDefault();
    const deadline_ms = Math.round(Number(deadlineS) * 1000);
    const body = action === 'drain' ? { deadline_ms } : { new_model_ref: modelRef.trim(), deadline_ms };
    setBusy(true);
    setError(undefined);
    try {
      await api.postJson(`/v2/pools/${encodeURIComponent(pool.pool_id)}/${action}`, body);
      onDone(
        action === 'drain'
          ? `Drain of ${pool.pool_id} accepted.`
          : `Reload of ${pool.pool_id} to ${modelRef.trim()} accepted.`,
      );
    } catch (err) {
      setError(err instanceof Error ? err.message : String(err));
      setBusy(false);
    }
  };

  return (
    <dialog ref={ref} class="card" aria-labelledby={`${id}-title`} aria-describedby={`${id}-what`} onClose={onCancel}>
      <form onSubmit={submit}>
        <h3 id={`${id}-title`}>{title}</h3>
        <p id={`${id}-what`}>
          {action === 'drain'
            ? `No new task goes to ${pool.pool_id}; tasks in flight may finish until the deadline, then its engine stops.`
            : `${pool.pool_id} drains, loads the new model and starts again; if that fails, the old engine comes back.`}
        </p>
        {action === 'reload' ? (
          <p class="field">
            <label for={`${id}-model`}>New model ref</label>
            <input
              id={`${id}-model`}
              type="text"
              required
              value={modelRef}
              onInput={(e) => setModelRef(e.currentTarget.value)}
            />
          </p>
        ) : null}
        <p class="field">
          <label for={`${id}-deadline`}>Deadline for tasks in flight (seconds)</label>
          <input
            id={`${id}-deadline`}
            type="number"
            min={0}
            max={3600}
            step={1}
            required
            value={deadlineS}
            onInput={(e) => setDeadlineS(e.currentTarget.value)}
          />
        </p>
        {error ? (
          <p class="error" role="alert">
            {error}
          </p>
        ) : null}
        <p class="buttons">
          <button type="submit" class={action === 'drain' ? 'danger' : ''} disabled={busy}>
            {action === 'drain' ? `Drain ${pool.pool_id}` : `Reload ${pool.pool_id}`}
          </button>
          <button type="button" onClick={() => ref.current?.close()} disabled={busy}>
            Cancel
          </button>
        </p>
      </form>
    </dialog>
  );
}
