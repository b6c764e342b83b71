import { Pool } from 'undici';
import { LlamaServerClient } from '@llama-orch/llamacpp-adapter';

/**
 * Engine HTTP clients, one connection pool per engine. Its own module so PoolManager can load it
 * (and undici) after the first spawn (performance notes: lazy engine clients).
 */
export interface EngineClients {
  /** A new client of the engine at `url`. */
  create(url: string): LlamaServerClient;
  close(): Promise<void>;
}

export function createEngineClients(): EngineClients {
  // One Pool per engine, kept for the daemon's life: every dispatch to it reuses the same Pool and
  // client, even though llama-server closes every streamed connection (performance notes: one
  // undici Pool per engine). No pipelining: a token stream never queues behind another request.
  const pools = new Set<Pool>();
  return {
    create: (url) => {
      const pool = new Pool(new URL(url).origin, { pipelining: 0, connections: 256 });
      pools.add(pool);
      return new LlamaServerClient({ baseUrl: url, dispatcher: pool });
    },
    close: () => Promise.all([...pools].map((p) => p.destroy().catch(() => undefined))).then(() => undefined),
  };
}
