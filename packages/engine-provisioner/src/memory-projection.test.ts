import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EngineProvisionError } from './errors.js';
import { writeScript } from './fixtures/fixture-source.js';
import { parseFitPrint, projectMemory } from './memory-projection.js';

// The parser against llama-fit-params' real stdout, and the runner against small fixture programs
// that print, fail, crash or hang on purpose. The real tool on a real model: llamacpp-adapter's
// fit-params.test.ts (it has the synthetic models).

/**
 * Captured stdout of the CPU-only llama-fit-params built from the bundled llama.cpp (de3ff81):
 * `llama-fit-params -m <synthetic:llama?ctx=4096> -c 4096 -np 2 --fit-print on`. Only the Host
 * line: a CPU build has no accelerator devices. (Its stderr: one `llama_fit_params: printing
 * estimated memory in MiB to stdout (device, model, context, compute) ...` log line.)
 */
const CPU_SAMPLE = 'Host 8 2 62 \n';

/**
 * A CUDA host's table in the format of common_fit_print (common/fit.cpp): one line per device in
 * ggml's order, then Host. Written from the source, not captured (no GPU here).
 */
const CUDA_SAMPLE = 'CUDA0 17904 384 898 \nCUDA1 8200 192 450 \nHost 615 0 12 \n';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'llorch-fit-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function errorOf(p: Promise<unknown>): Promise<EngineProvisionError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(EngineProvisionError);
  return err as EngineProvisionError;
}

describe('parseFitPrint', () => {
  it('reads the CPU-only table: no devices, the Host line', () => {
    expect(parseFitPrint(CPU_SAMPLE)).toEqual({
      devices: [],
      host: { model_mib: 8, context_mib: 2, compute_mib: 62, total_mib: 72 },
    });
  });

  it('reads one line per device in order, then Host', () => {
    const p = parseFitPrint(CUDA_SAMPLE);
    expect(p.devices).toEqual([
      { name: 'CUDA0', model_mib: 17904, context_mib: 384, compute_mib: 898, total_mib: 19186 },
      { name: 'CUDA1', model_mib: 8200, context_mib: 192, compute_mib: 450, total_mib: 8842 },
    ]);
    expect(p.host).toEqual({ model_mib: 615, context_mib: 0, compute_mib: 12, total_mib: 627 });
  });

  it('refuses what it does not read instead of leaving memory out', () => {
    for (const [out, why] of [
      ['', /no Host line/],
      ['CUDA0 1 2 3 \n', /no Host line/],
      ['Host 1 2 3 \nCUDA0 1 2 3 \n', /no Host line/],
      ['Host 1 2 3 \nHost 1 2 3 \n', /more than one Host/],
      ['CUDA0 1 2 \nHost 1 2 3 \n', /unexpected line "CUDA0 1 2 "/],
      ['warning: something\nHost 1 2 3 \n', /unexpected line/],
      ['Host 1 2 -3 \n', /unexpected line/],
    ] as const) {
      let err: unknown;
      try {
        parseFitPrint(out);
      } catch (e) {
        err = e;
      }
      expect(err, JSON.stringify(out)).toBeInstanceOf(EngineProvisionError);
      expect((err as EngineProvisionError).code).toBe('MEMORY_PROJECTION_FAILED');
      expect((err as EngineProvisionError).context.reason).toBe('output');
      expect((err as EngineProvisionError).message).toMatch(why);
    }
  });
});

describe('projectMemory with fixture programs', () => {
  it('passes model, ctx, slots, GPU layers, --fit-print on and the extra arguments, in a scrubbed env', async () => {
    const argv = join(dir, 'argv');
    const tool = await writeScript(
      join(dir, 'fit-ok'),
      `printf '%s\\n' "$@" "env:\${LLAMA_ARG_CTX_SIZE-unset}:\${KEEP-unset}" > '${argv}'; printf 'CUDA0 10 20 30 \\nHost 1 2 3 \\n'`,
    );
    const p = await projectMemory({
      fitParams: tool,
      model: '/models/m.gguf',
      ctx: 8192,
      slots: 4,
      gpuLayers: 99,
      extraArgs: ['-ub', '1024'],
      env: { LLAMA_ARG_CTX_SIZE: '999', KEEP: 'yes' },
    });
    expect(p).toEqual({
      devices: [{ name: 'CUDA0', model_mib: 10, context_mib: 20, compute_mib: 30, total_mib: 60 }],
      host: { model_mib: 1, context_mib: 2, compute_mib: 3, total_mib: 6 },
    });
    expect((await readFile(argv, 'utf8')).trim().split('\n')).toEqual([
      '-m',
      '/models/m.gguf',
      '-c',
      '8192',
      '-np',
      '4',
      '-ngl',
      '99',
      '--fit-print',
      'on',
      '-ub',
      '1024',
      'env:unset:yes',
    ]);
  });

  it('a non-zero exit is MEMORY_PROJECTION_FAILED with its stderr', async () => {
    const tool = await writeScript(
      join(dir, 'fit-exit'),
      `echo "llama_model_load: error loading model: failed to open $2" >&2; exit 1`,
    );
    const err = await errorOf(projectMemory({ fitParams: tool, model: '/nope.gguf', ctx: 1024, slots: 1 }));
    expect(err.code).toBe('MEMORY_PROJECTION_FAILED');
    expect(err.context).toMatchObject({ reason: 'exit', exitCode: 1, model: '/nope.gguf', fitParams: tool });
    expect(err.message).toMatch(/exited 1 on \/nope\.gguf:\nllama_model_load: error loading model: failed to open/);
    expect(err.context.stderr).toMatch(/failed to open \/nope\.gguf/);
  });

  it('a crash is reported with its signal', async () => {
    const tool = await writeScript(join(dir, 'fit-crash'), 'echo "about to crash" >&2; kill -SEGV $$');
    const err = await errorOf(projectMemory({ fitParams: tool, model: '/m.gguf', ctx: 1024, slots: 1 }));
    expect(err.context).toMatchObject({ reason: 'exit', signal: 'SIGSEGV' });
    expect(err.message).toMatch(/ended by SIGSEGV/);
  });

  it('a hang is killed after the timeout', async () => {
    const tool = await writeScript(join(dir, 'fit-hang'), 'exec sleep 30');
    const started = performance.now();
    const err = await errorOf(
      projectMemory({ fitParams: tool, model: '/m.gguf', ctx: 1024, slots: 1, timeoutMs: 300 }),
    );
    expect(err.context.reason).toBe('timeout');
    expect(err.message).toMatch(/ran past 300 ms/);
    expect(performance.now() - started).toBeLessThan(5000);
  });

  it('the caller aborting is ABORTED', async () => {
    const tool = await writeScript(join(dir, 'fit-slow'), 'exec sleep 30');
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 100);
    const err = await errorOf(
      projectMemory({ fitParams: tool, model: '/m.gguf', ctx: 1024, slots: 1, signal: ac.signal }),
    );
    expect(err.code).toBe('ABORTED');
  });

  it('a missing tool and an unread table are MEMORY_PROJECTION_FAILED', async () => {
    const missing = await errorOf(
      projectMemory({ fitParams: join(dir, 'no-such-tool'), model: '/m.gguf', ctx: 1024, slots: 1 }),
    );
    expect(missing.context.reason).toBe('spawn');
    const chatty = await writeScript(join(dir, 'fit-chatty'), `echo "CUDA0 1 2 3"; echo "Host"`);
    const err = await errorOf(projectMemory({ fitParams: chatty, model: '/m.gguf', ctx: 1024, slots: 1 }));
    expect(err.context).toMatchObject({ reason: 'output', model: '/m.gguf' });
  });
});
