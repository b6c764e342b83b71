import { describe, expect, it } from 'vitest';
import { scrubEngineEnv } from './env-scrub.js';

describe('scrubEngineEnv', () => {
  it('removes LLAMA_ARG_*, LLAMA_API_KEY and AIP_* and keeps the rest', () => {
    const env = {
      PATH: '/usr/bin',
      HOME: '/root',
      CUDA_VISIBLE_DEVICES: '0',
      LLAMA_ARG_MODEL: '/evil.gguf',
      LLAMA_ARG_N_PARALLEL: '8',
      LLAMA_API_KEY: 'secret',
      AIP_MODE: 'PREDICTION',
      AIP_HTTP_PORT: '8080',
      LLAMA_CACHE: '/keep',
      UNSET: undefined,
    };
    const out = scrubEngineEnv(env);
    expect(out).toEqual({ PATH: '/usr/bin', HOME: '/root', CUDA_VISIBLE_DEVICES: '0', LLAMA_CACHE: '/keep' });
    // the input is not modified
    expect(env.LLAMA_API_KEY).toBe('secret');
  });
});
