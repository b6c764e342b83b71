import { Agent } from 'undici';
import { LlamaServerClient } from '@llama-orch/llamacpp-adapter';

/** Engine HTTP clients sharing one agent. Its own module so PoolManager can load it after the first spawn. */
export interface EngineClients {
  /** A new client of the engine at `url`. */
  create(url: string): LlamaServerClient;
  close(): Promise<void>;
}

export function createEngineClients(): EngineClients {
  // No pipelining: a token stream must never queue behind another request on one socket.
  const agent = new Agent({ pipelining: 0, connections: 256 });
  return {
    create: (url) => new LlamaServerClient({ baseUrl: url, dispatcher: agent }),
    close: () => agent.destroy().catch(() => undefined),
  };
}
