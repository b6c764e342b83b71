import { useEffect, useState } from 'preact/hooks';
import { formatClock } from '../lib/format.js';
import type { StreamStatus } from '../lib/snapshot-stream.js';

/** Seconds until `at`, re-rendered every second while counting. */
function useCountdown(at: number | undefined): number | undefined {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    if (at === undefined) return undefined;
    const t = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(t);
  }, [at]);
  return at === undefined ? undefined : Math.max(0, Math.ceil((at - now) / 1000));
}

/** The header's connection line: live, connecting, reconnecting (why, and when), or waiting for a key. */
export function ConnectionStatus({ status, updatedAt }: { status: StreamStatus; updatedAt: number | undefined }) {
  const retryIn = useCountdown(status.state === 'retrying' ? status.retry_at_ms : undefined);
  let text: string;
  switch (status.state) {
    case 'live':
      text = updatedAt === undefined ? 'Live' : `Live · updated ${formatClock(updatedAt)}`;
      break;
    case 'connecting':
      text = status.attempt === 0 ? 'Connecting…' : `Reconnecting (attempt ${status.attempt + 1})…`;
      break;
    case 'retrying':
      text = `Disconnected (${status.reason}) · retrying in ${retryIn ?? 0} s`;
      break;
    case 'needs_key':
      text = 'Needs an API key';
      break;
    case 'forbidden':
      text = `Key refused for the dashboard: ${status.reason}`;
      break;
    case 'closed':
      text = 'Closed';
      break;
  }
  return (
    <p class="connection" role="status" data-state={status.state}>
      <span class="dot" aria-hidden="true" />
      {text}
    </p>
  );
}
