import { scrubEngineEnv } from './env-scrub.js';
import { EngineProvisionError } from './errors.js';
import { probe } from './exec.js';

type Env = Readonly<Record<string, string | undefined>>;

/** What one memory holder takes, in MiB as llama.cpp prints them (each term rounded down). */
export interface MemoryBreakdown {
  /** Weights placed there. */
  model_mib: number;
  /** KV cache (and recurrent state) for `ctx` tokens over `slots` sequences. */
  context_mib: number;
  /** Compute buffers (sized by llama.cpp for its largest graph). */
  compute_mib: number;
  /** `model_mib + context_mib + compute_mib`. */
  total_mib: number;
}

/** One accelerator, named as ggml names it (`CUDA0`, `Vulkan1`, …). */
export interface DeviceMemory extends MemoryBreakdown {
  name: string;
}

/**
 * llama.cpp's own projection of a model load: one entry per accelerator it would use, in its order
 * (none on a CPU-only build), and the host's share (system memory: weights not offloaded, CPU KV,
 * CPU compute buffers).
 */
export interface MemoryProjection {
  devices: DeviceMemory[];
  host: MemoryBreakdown;
}

/** Inputs of {@link projectMemory}. */
export interface ProjectMemoryOptions {
  /** `llama-fit-params` (`EngineBinary.fit_params_path`). */
  fitParams: string;
  /** GGUF model file (`-m`). */
  model: string;
  /** Total context, as `llama-server -c` takes it (shared by the slots). */
  ctx: number;
  /** Sequences (`-np`): llama-server's slots. */
  slots: number;
  /** Layers offloaded (`-ngl`); absent: llama.cpp's default. */
  gpuLayers?: number;
  /**
   * More arguments, verbatim after the managed ones (`-b`, `-ub`, `-fa`, `-ctk`…). Only arguments
   * common to llama.cpp's tools: a server-only flag (`--metrics`, `--jinja`) makes the tool exit 1.
   */
  extraArgs?: readonly string[];
  /**
   * The tool's environment, scrubbed like an engine's (`scrubEngineEnv`: `LLAMA_ARG_*` would change
   * what it projects). Pass the engine's (with its `CUDA_VISIBLE_DEVICES`): the devices listed are
   * the ones the tool sees. @default {}
   */
  env?: Env;
  /** Kill the tool after this long (it reads only the model's metadata). @default 60000 */
  timeoutMs?: number;
  signal?: AbortSignal;
}

/** `<name> <model> <context> <compute>` with one space after each field (common/fit.cpp, common_fit_print). */
const ROW = /^(\S(?:.*\S)?) (\d+) (\d+) (\d+) ?$/;

/**
 * Reads what `llama-fit-params --fit-print on` writes to stdout: one line per device, then the
 * `Host` line. Any other non-empty line, a missing `Host` line or one that is not last is an error:
 * a row this parser skipped would be memory left out of the projection. Throws
 * `MEMORY_PROJECTION_FAILED` (`reason: 'output'`).
 */
export function parseFitPrint(stdout: string): MemoryProjection {
  const lines = stdout.split('\n').filter((l) => l.trim() !== '');
  const bad = (why: string): never => {
    throw new EngineProvisionError('MEMORY_PROJECTION_FAILED', `llama-fit-params output not understood: ${why}`, {
      reason: 'output',
      stdout: stdout.slice(0, 2000),
    });
  };
  const rows = lines.map((line) => {
    const m = ROW.exec(line);
    if (!m) return bad(`unexpected line ${JSON.stringify(line)}`);
    const [model, context, compute] = [m[2], m[3], m[4]].map(Number) as [number, number, number];
    return {
      name: m[1] as string,
      model_mib: model,
      context_mib: context,
      compute_mib: compute,
      total_mib: model + context + compute,
    };
  });
  const last = rows.at(-1);
  if (last?.name !== 'Host') return bad('no Host line at the end');
  const devices = rows.slice(0, -1);
  if (devices.some((d) => d.name === 'Host')) bad('more than one Host line');
  const { name: _host, ...host } = last;
  return { devices, host };
}

function tail(text: string): string {
  return text.trim().split('\n').slice(-8).join('\n');
}

/**
 * Runs `llama-fit-params -m <model> -c <ctx> -np <slots> [-ngl <gpuLayers>] --fit-print on
 * [...extraArgs]` and parses its table ({@link parseFitPrint}). The tool loads the model's
 * metadata, not its weights, so it takes well under a second for any size. `ABORTED` on the
 * signal, `MEMORY_PROJECTION_FAILED` when the tool cannot run, fails, hangs or prints something
 * else.
 */
export async function projectMemory(opts: ProjectMemoryOptions): Promise<MemoryProjection> {
  const args = [
    '-m',
    opts.model,
    '-c',
    String(opts.ctx),
    '-np',
    String(opts.slots),
    ...(opts.gpuLayers !== undefined ? ['-ngl', String(opts.gpuLayers)] : []),
    '--fit-print',
    'on',
    ...(opts.extraArgs ?? []),
  ];
  const context = { fitParams: opts.fitParams, model: opts.model, args };
  const res = await probe(opts.fitParams, args, {
    env: scrubEngineEnv(opts.env ?? {}),
    timeoutMs: opts.timeoutMs ?? 60_000,
    ...(opts.signal ? { signal: opts.signal } : {}),
  });
  if (opts.signal?.aborted)
    throw new EngineProvisionError('ABORTED', 'memory projection aborted', context, { cause: opts.signal.reason });
  const stderr = tail(res.stderr);
  if (res.timedOut)
    throw new EngineProvisionError(
      'MEMORY_PROJECTION_FAILED',
      `llama-fit-params ran past ${String(opts.timeoutMs ?? 60_000)} ms on ${opts.model}`,
      { ...context, reason: 'timeout', stderr },
    );
  if (res.signal !== undefined)
    throw new EngineProvisionError(
      'MEMORY_PROJECTION_FAILED',
      `llama-fit-params ended by ${res.signal} on ${opts.model}${stderr ? `:\n${stderr}` : ''}`,
      { ...context, reason: 'exit', signal: res.signal, stderr },
    );
  if (res.failure !== undefined)
    throw new EngineProvisionError('MEMORY_PROJECTION_FAILED', `llama-fit-params could not run: ${res.failure}`, {
      ...context,
      reason: 'spawn',
      stderr,
    });
  if (res.exitCode !== 0)
    throw new EngineProvisionError(
      'MEMORY_PROJECTION_FAILED',
      `llama-fit-params exited ${String(res.exitCode)} on ${opts.model}${stderr ? `:\n${stderr}` : ''}`,
      { ...context, reason: 'exit', exitCode: res.exitCode, stderr },
    );
  try {
    return parseFitPrint(res.stdout);
  } catch (err) {
    if (err instanceof EngineProvisionError)
      throw new EngineProvisionError(err.code, err.message, { ...context, ...err.context, stderr }, { cause: err });
    throw err;
  }
}
