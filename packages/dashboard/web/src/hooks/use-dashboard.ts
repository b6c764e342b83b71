import { useEffect, useRef, useState } from 'preact/hooks';
import type { DashboardSnapshot } from '@llama-orch/contracts';
import type { ApiClient } from '../lib/api.js';
import { SnapshotStream, type StreamStatus } from '../lib/snapshot-stream.js';

export interface Dashboard {
  /** Latest snapshot; kept while reconnecting, so the page shows the last known state (marked stale by the status). */
  snapshot: DashboardSnapshot | undefined;
  status: StreamStatus;
  /** Connect again now (after a key was entered). */
  reconnect(): void;
}

/** The page's live data: owns the one SnapshotStream for the component's life. */
export function useDashboard(api: ApiClient): Dashboard {
  const [snapshot, setSnapshot] = useState<DashboardSnapshot | undefined>(undefined);
  const [status, setStatus] = useState<StreamStatus>({ state: 'connecting', attempt: 0 });
  const stream = useRef<SnapshotStream | undefined>(undefined);

  useEffect(() => {
    const s = new SnapshotStream({ api, onSnapshot: setSnapshot, onStatus: setStatus });
    stream.current = s;
    s.start();
    return () => {
      s.close();
      stream.current = undefined;
    };
  }, [api]);

  return { snapshot, status, reconnect: () => stream.current?.reconnect() };
}
