import { Pool } from 'undici';
import { LlamaServerClient } from '@llama-orch/llamacpp-adapter';

/** Engine HTTP clients, one connection pool per engine. Its own module so PoolManager can load it after the first spawn. */
export interface EngineClients {
  /** A new client of the engine at `url`. */
  create(url: string): LlamaServerClient;
  close(): Promise<void>;
}

export function createEngineClients(): EngineClients {
  // A Pool per engine rather than one Agent: an Agent drops an origin's pool when its last connection
  // closes, and llama-server closes every streamed connection, so each dispatch built a new Pool and
  // Client before it could connect (~0.2 ms of the engine request's critical path here).
  // No pipelining: a token stream must never queue behind another request on one socket.
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
