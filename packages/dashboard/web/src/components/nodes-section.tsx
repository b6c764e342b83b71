import type { DashboardSnapshot, NodeInfo } from '@llama-orch/contracts';
import { formatAgo, formatBytes } from '../lib/format.js';
import { MemoryMeter } from './memory-meter.js';
import { NodeModels } from './node-models.js';
import { TableHead } from './table-head.js';

function gpus(node: NodeInfo): string {
  const list = node.capabilities.gpus;
  if (list.length === 0) return `none (${node.capabilities.cpu_cores} CPU cores)`;
  return list.map((g) => `GPU ${g.device_id}: ${g.name}, ${formatBytes(g.vram_total_bytes)}`).join('; ');
}

/** Free VRAM as each GPU pool of the node last reported it (pool-managerd reads it per pool's devices). */
function freeVram(node: NodeInfo): string {
  const readings = node.pools.filter((p) => p.vram_free_bytes !== undefined);
  if (readings.length === 0) return '—';
  return readings.map((p) => `${formatBytes(p.vram_free_bytes)} (${p.pool_id})`).join('; ');
}

export function NodesSection({ snapshot }: { snapshot: DashboardSnapshot }) {
  const now = snapshot.generated_at_ms;
  return (
    <section class="card" aria-labelledby="nodes-heading">
      <h2 id="nodes-heading">Nodes</h2>
      {snapshot.nodes.length === 0 ? (
        <p class="empty">
          No node has registered. Start pool-managerd on a GPU host (or <code>llorch up</code> here).
        </p>
      ) : (
        <div class="scroll">
          <table>
            <caption>Nodes ({snapshot.nodes.length})</caption>
            <TableHead
              columns={[
                'Node',
                'State',
                'Last heartbeat',
                'On-demand memory',
                'Models loaded',
                'GPUs',
                'Free VRAM',
                'Version',
                'Address',
              ]}
            />
            <tbody>
              {snapshot.nodes.map((n) => (
                <tr key={n.node_id} data-node={n.node_id}>
                  <th scope="row">{n.node_id}</th>
                  <td>
                    <span class={`badge state-${n.state}`} data-state={n.state}>
                      {n.state}
                    </span>
                    {n.state !== 'online' ? <span class="muted"> since {formatAgo(n.state_since, now)}</span> : null}
                  </td>
                  <td>
                    <time dateTime={n.last_seen}>{formatAgo(n.last_seen, now)}</time>
                  </td>
                  <td>
                    {n.memory !== undefined ? (
                      <MemoryMeter nodeId={n.node_id} memory={n.memory} />
                    ) : (
                      <span class="muted">none (loads nothing on request)</span>
                    )}
                  </td>
                  <td>
                    <NodeModels snapshot={snapshot} nodeId={n.node_id} />
                  </td>
                  <td>{gpus(n)}</td>
                  <td>{freeVram(n)}</td>
                  <td>{n.version}</td>
                  <td>
                    <code>{n.address}</code>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}
