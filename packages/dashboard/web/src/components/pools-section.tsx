import { useState } from 'preact/hooks';
import type { ClusterPool, DashboardSnapshot } from '@llama-orch/contracts';
import type { ApiClient } from '../lib/api.js';
import { formatBytes } from '../lib/format.js';
import { PoolActionDialog, type PoolAction } from './pool-action-dialog.js';
import { TableHead } from './table-head.js';

/** The state an operator should read: a ready pool whose node stopped heartbeating is not serving. */
function shownState(p: ClusterPool): string {
  if (p.node_state === 'offline') return `${p.state} (node offline)`;
  if (p.draining && p.state === 'ready') return 'draining';
  return p.state;
}

export function PoolsSection({ snapshot, api }: { snapshot: DashboardSnapshot; api: ApiClient }) {
  const [open, setOpen] = useState<{ action: PoolAction; poolKey: string } | undefined>(undefined);
  const [notice, setNotice] = useState<string | undefined>(undefined);
  const key = (p: ClusterPool): string => `${p.node_id}/${p.pool_id}`;
  const openPool = open ? snapshot.pools.find((p) => key(p) === open.poolKey) : undefined;

  return (
    <section class="card" aria-labelledby="pools-heading">
      <h2 id="pools-heading">Pools</h2>
      <p class="notice" role="status">
        {notice ?? ''}
      </p>
      {snapshot.pools.length === 0 ? (
        <p class="empty">No pools yet.</p>
      ) : (
        <div class="scroll">
          <table>
            <caption>Pools ({snapshot.pools.length})</caption>
            <TableHead
              columns={[
                'Pool',
                'Node',
                'State',
                'Model',
                'Engine',
                'Slots busy / total',
                'Free VRAM',
                'Last error',
                'Actions',
              ]}
            />
            <tbody>
              {snapshot.pools.map((p) => {
                const aliases = p.aliases ?? [];
                const state = shownState(p);
                return (
                  <tr key={key(p)} data-pool={p.pool_id}>
                    <th scope="row">{p.pool_id}</th>
                    <td>{p.node_id}</td>
                    <td>
                      <span class={`badge state-${p.state}`} data-state={p.state}>
                        {state}
                      </span>
                    </td>
                    <td>
                      {p.models.map((m) => (
                        <div key={m}>
                          <code>{m}</code>
                        </div>
                      ))}
                      {aliases.length > 0 ? <div class="muted">aliases: {aliases.join(', ')}</div> : null}
                      <div class="muted" data-origin={p.origin ?? 'config'}>
                        {p.origin === 'catalog' ? 'loaded on demand' : 'static (node config)'}
                      </div>
                    </td>
                    <td>{p.engine_version || '—'}</td>
                    <td>
                      {p.slots_total - p.slots_free} / {p.slots_total}
                    </td>
                    <td>{formatBytes(p.vram_free_bytes)}</td>
                    {p.last_error ? <td class="error-text">{p.last_error}</td> : <td>—</td>}
                    <td class="actions">
                      <button
                        type="button"
                        aria-label={`Drain ${p.pool_id}`}
                        disabled={p.draining || p.state === 'stopped'}
                        onClick={() => setOpen({ action: 'drain', poolKey: key(p) })}
                      >
                        Drain
                      </button>
                      <button
                        type="button"
                        aria-label={`Reload ${p.pool_id}`}
                        disabled={p.state === 'provisioning'}
                        onClick={() => setOpen({ action: 'reload', poolKey: key(p) })}
                      >
                        Reload
                      </button>
                    </td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </div>
      )}
      {open && openPool ? (
        <PoolActionDialog
          key={`${open.action}-${open.poolKey}`}
          action={open.action}
          pool={openPool}
          api={api}
          onDone={(message) => {
            setOpen(undefined);
            setNotice(message);
          }}
          onCancel={() => setOpen(undefined)}
        />
      ) : null}
    </section>
  );
}
