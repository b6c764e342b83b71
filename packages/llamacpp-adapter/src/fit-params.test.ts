import { describe, expect, it } from 'vitest';
import { EngineProvisionError, ensureCpuTestEngine, projectMemory } from '@llama-orch/engine-provisioner';
import { readGgufHeader } from '@llama-orch/model-provisioner';
import { testModelPath } from './testing/test-engine.js';

// engine-provisioner's projectMemory on the real llama-fit-params (built with the shared CPU test
// engine) and a real synthetic model; it lives here because this package's tests have the models
// (engine-provisioner sits below model-provisioner). The parser's fixture tests are engine-provisioner's.

const MiB = 1024 * 1024;
const BUILD_TIMEOUT = 45 * 60_000;

describe('projectMemory with the real llama-fit-params', () => {
  it(
    'projects a CPU load: no devices; the Host context term is the f16 KV cache exactly and grows with ctx',
    async () => {
      const engine = await ensureCpuTestEngine();
      const fitParams = engine.fit_params_path;
      expect(fitParams, 'a built engine carries llama-fit-params').toBeDefined();
      const model = await testModelPath('synthetic:llama?ctx=4096');
      const header = await readGgufHeader(model);
      const num = (key: string): number => {
        const v = header.kvs.find((kv) => kv.key === key)?.value;
        if (typeof v !== 'number') throw new Error(`${key} missing`);
        return v;
      };
      const layers = num('llama.block_count');
      const embd = num('llama.embedding_length');
      const heads = num('llama.attention.head_count');
      const kvHeads = num('llama.attention.head_count_kv');
      // K and V, f16 (llama.cpp's default cache type), per token and layer
      const kvBytesPerToken = layers * 2 * (embd / heads) * kvHeads * 2;

      const at4k = await projectMemory({ fitParams: fitParams ?? '', model, ctx: 4096, slots: 2 });
      expect(at4k.devices).toEqual([]);
      expect(at4k.host.context_mib).toBe(Math.floor((4096 * kvBytesPerToken) / MiB));
      const weights = header.tensors.reduce((sum, t) => sum + t.nbytes, 0);
      expect(Math.abs(at4k.host.model_mib - Math.floor(weights / MiB))).toBeLessThanOrEqual(1);
      expect(at4k.host.compute_mib).toBeGreaterThan(0);
      expect(at4k.host.total_mib).toBe(at4k.host.model_mib + at4k.host.context_mib + at4k.host.compute_mib);

      const at16k = await projectMemory({ fitParams: fitParams ?? '', model, ctx: 16384, slots: 2 });
      expect(at16k.host.context_mib).toBe(Math.floor((16384 * kvBytesPerToken) / MiB));
      expect(at16k.host.model_mib).toBe(at4k.host.model_mib);
    },
    BUILD_TIMEOUT,
  );

  it(
    'a model the tool cannot read, or a server-only flag, is MEMORY_PROJECTION_FAILED with its stderr',
    async () => {
      const fitParams = (await ensureCpuTestEngine()).fit_params_path ?? '';
      const missing = await projectMemory({ fitParams, model: '/nonexistent/m.gguf', ctx: 1024, slots: 1 }).catch(
        (e: unknown) => e,
      );
      expect(missing).toBeInstanceOf(EngineProvisionError);
      expect(missing).toMatchObject({ code: 'MEMORY_PROJECTION_FAILED', context: { reason: 'exit' } });
      // the tool throws out of main (SIGABRT); llama.cpp's log thread may lose its lines naming the
      // file, but the exception's own text always reaches stderr (and our message names the model)
      expect(String((missing as EngineProvisionError).context.stderr)).toMatch(/failed to load model/);
      expect((missing as EngineProvisionError).message).toMatch(/\/nonexistent\/m\.gguf/);

      const model = await testModelPath('synthetic:llama?ctx=4096');
      const serverOnly = await projectMemory({ fitParams, model, ctx: 1024, slots: 1, extraArgs: ['--metrics'] }).catch(
        (e: unknown) => e,
      );
      expect(serverOnly).toMatchObject({ code: 'MEMORY_PROJECTION_FAILED', context: { reason: 'exit' } });
    },
    BUILD_TIMEOUT,
  );
});
