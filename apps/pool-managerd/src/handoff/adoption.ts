import type { HandoffFile, PoolCapability } from '@llama-orch/contracts';
import type { EngineHealth, EngineProps, LlamaServerClient } from '@llama-orch/llamacpp-adapter';
import { HandoffError } from '../errors.js';
import { engineCapabilities } from '../supervision/engine-capabilities.js';

/** What an adopted engine answered: its `/props` and what it serves. */
export type ProbedEngine = EngineProps & { capabilities: PoolCapability[] };

export interface ProbeOptions {
  /** How long the engine may take to answer `/health` 200, ms. */
  timeoutMs: number;
  /** Pause between `/health` probes, ms. @default 100 */
  intervalMs?: number;
  /** Ends the wait (the watcher closing): the handoff is rejected. */
  signal?: AbortSignal;
  onHealth?: (h: EngineHealth) => void;
}

/**
 * Checks the engine an external handoff names before it is adopted: waits (up to `timeoutMs`) for
 * `/health` 200, then reads `/props` for slots, context and build identity — the engine's own
 * answers, never the file's — and what it serves (its flags, `/infill`). Throws {@link HandoffError} when the engine does not become healthy,
 * so the file is rejected with that reason.
 */
export async function probeExternalEngine(
  client: LlamaServerClient,
  handoff: HandoffFile,
  opts: ProbeOptions,
): Promise<ProbedEngine> {
  const deadline = Date.now() + opts.timeoutMs;
  let last: EngineHealth | string = 'down';
  for (;;) {
    try {
      last = await client.health(opts.signal);
    } catch (err) {
      last = `error: ${(err as Error).message}`;
    }
    if (last === 'ready' || last === 'loading' || last === 'down') opts.onHealth?.(last);
    if (last === 'ready') break;
    if (opts.signal?.aborted === true || Date.now() >= deadline) {
      throw new HandoffError(`engine at ${handoff.url} is not healthy (${last}) after ${opts.timeoutMs} ms`, {
        url: handoff.url,
      });
    }
    await new Promise((r) => setTimeout(r, opts.intervalMs ?? 100).unref());
  }
  try {
    const props = await client.props(opts.signal);
    return { ...props, capabilities: await engineCapabilities(client, handoff.flags, opts.signal) };
  } catch (err) {
    throw new HandoffError(
      `engine at ${handoff.url} answered /health but not /props: ${(err as Error).message}`,
      { url: handoff.url },
      { cause: err },
    );
  }
}
