import { Pool } from 'undici';
import { ANSWER_KEEP_ALIVE, LlamaServerClient } from '@llama-orch/llamacpp-adapter';

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
  // Non-streamed answers have a Pool of their own whose sockets are kept between answers (the engine
  // keeps them open after an answer): no connect and close per request.
  const pools = new Set<Pool>();
  return {
    create: (url) => {
      const origin = new URL(url).origin;
      const pool = new Pool(origin, { pipelining: 0, connections: 256 });
      const answers = new Pool(origin, { connections: 256, ...ANSWER_KEEP_ALIVE });
      pools.add(pool).add(answers);
      return new LlamaServerClient({ baseUrl: url, dispatcher: pool, answerDispatcher: answers });
    },
    close: () => Promise.all([...pools].map((p) => p.destroy().catch(() => undefined))).then(() => undefined),
  };
}
