import { request, type Dispatcher } from 'undici';

/** One slot of llama-server's `GET /slots`. */
interface SlotView {
  id: number;
  is_processing: boolean;
}

/** Whether any slot of the engine is processing (`GET /slots`). */
export async function engineBusy(engineUrl: string, dispatcher: Dispatcher): Promise<boolean> {
  const res = await request(`${engineUrl}/slots`, { method: 'GET', dispatcher });
  const text = await res.body.text();
  if (res.statusCode !== 200) throw new Error(`GET /slots answered ${res.statusCode}: ${text}`);
  const slots = JSON.parse(text) as SlotView[];
  return slots.some((s) => s.is_processing);
}

/**
 * Polls `GET /slots` every `intervalMs` until no slot is processing; returns the completion time
 * (performance.now()) of the first poll that saw them all idle, or NaN on timeout.
 */
export async function waitEngineIdle(
  engineUrl: string,
  dispatcher: Dispatcher,
  intervalMs: number,
  timeoutMs: number,
): Promise<number> {
  const deadline = performance.now() + timeoutMs;
  while (performance.now() < deadline) {
    const busy = await engineBusy(engineUrl, dispatcher);
    const at = performance.now();
    if (!busy) return at;
    await new Promise((r) => setTimeout(r, intervalMs));
  }
  return Number.NaN;
}
