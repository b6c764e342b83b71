import { useEffect, useState } from 'preact/hooks';
import type { ApiClient } from './lib/api.js';
import { useDashboard } from './hooks/use-dashboard.js';
import { ConnectionStatus } from './components/connection-status.js';
import { KeyForm } from './components/key-form.js';
import { ModelFeedSection } from './components/model-feed-section.js';
import { NodesSection } from './components/nodes-section.js';
import { PoolsSection } from './components/pools-section.js';
import { QueueSection } from './components/queue-section.js';
import { ReplicasSection } from './components/replicas-section.js';
import { ThroughputSection } from './components/throughput-section.js';
import { TasksSection } from './components/tasks-section.js';
import { Playground } from './components/playground.js';

/** The whole page: header (connection, key), then one section per part of the cluster. */
export function App({ api }: { api: ApiClient }) {
  const { snapshot, status, reconnect } = useDashboard(api);
  const [hasKey, setHasKey] = useState(api.keys.get() !== undefined);
  // a 401 from an action or the playground asks for a key too, not only the event stream's
  const [refused, setRefused] = useState<string | undefined>(undefined);
  useEffect(() => {
    const off = api.onUnauthorized((err) => setRefused(err.message));
    return () => {
      off();
    };
  }, [api]);

  const streamRefused = status.state === 'needs_key' || status.state === 'forbidden' ? status.reason : undefined;
  const askKey = streamRefused !== undefined || refused !== undefined;
  const useKey = (key: string): void => {
    api.keys.set(key);
    setHasKey(true);
    setRefused(undefined);
    reconnect();
  };
  const forgetKey = (): void => {
    api.keys.clear();
    setHasKey(false);
    reconnect();
  };

  return (
    <>
      <a class="skip" href="#main">
        Skip to the dashboard
      </a>
      <header class="top">
        <div>
          <h1>llama-orch</h1>
          <p class="muted">{snapshot ? `orchestratord ${snapshot.version}` : 'orchestratord'}</p>
        </div>
        <ConnectionStatus status={status} updatedAt={snapshot?.generated_at_ms} />
        {hasKey ? (
          <button type="button" onClick={forgetKey}>
            Forget key
          </button>
        ) : null}
      </header>
      {askKey ? <KeyForm reason={streamRefused ?? refused} hadKey={hasKey} onSubmit={useKey} /> : null}
      <main id="main">
        {snapshot ? (
          <>
            <NodesSection snapshot={snapshot} />
            <PoolsSection snapshot={snapshot} api={api} />
            <ModelFeedSection snapshot={snapshot} />
            <div class="pair">
              <QueueSection snapshot={snapshot} />
              <ThroughputSection snapshot={snapshot} />
            </div>
            <TasksSection snapshot={snapshot} api={api} />
            <ReplicasSection snapshot={snapshot} />
            <Playground snapshot={snapshot} api={api} />
          </>
        ) : askKey ? null : (
          <p class="card empty">Waiting for the first snapshot from orchestratord…</p>
        )}
      </main>
    </>
  );
}
