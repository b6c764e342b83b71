import { spawn, type ChildProcess } from 'node:child_process';
import pino from 'pino';
import { ensureCpuTestEngine, findFreePort, scrubEngineEnv, testCacheDir } from '@llama-orch/engine-provisioner';
import { ModelProvisioner } from '@llama-orch/model-provisioner';

/**
 * Test support: the real llama-server (built once into the shared test cache by the engine
 * provisioner) serving the synthetic llama model. Reads process.env on purpose (test entry point).
 */
export interface TestEngine {
  url: string;
  port: number;
  pid: number;
  binaryPath: string;
  modelPath: string;
  args: string[];
  child: ChildProcess;
  stop(): Promise<void>;
}

/** Synthetic llama with a 4096-token training context: long streams stay in flight for seconds. */
export const TEST_MODEL_REF = 'synthetic:llama?ctx=4096';

export async function testModelPath(ref = TEST_MODEL_REF): Promise<string> {
  const logger = pino({ level: process.env.LOG_LEVEL ?? 'warn' }, pino.destination(2));
  const models = new ModelProvisioner({ cacheDir: testCacheDir(), logger, progressTty: false });
  try {
    return (await models.ensure(ref)).local_path;
  } finally {
    await models.close();
  }
}

/**
 * Spawns llama-server (`-np slots`, `-c ctx`, one thread: OpenMP spin-waits make two threads crawl on
 * a busy 2-core machine) on a free loopback port; does not wait for readiness.
 */
export async function spawnTestEngine(
  opts: { slots?: number; ctx?: number; extra?: string[]; model?: string } = {},
): Promise<TestEngine> {
  const bin = await ensureCpuTestEngine();
  const modelPath = await testModelPath(opts.model);
  const port = await findFreePort();
  const args = [
    '-m',
    modelPath,
    '--host',
    '127.0.0.1',
    '--port',
    String(port),
    '-c',
    String(opts.ctx ?? 4096),
    '-np',
    String(opts.slots ?? 1),
    '--no-webui',
    '--metrics',
    '-t',
    '1',
    ...(opts.extra ?? []),
  ];
  const child = spawn(bin.binary_path, args, { env: scrubEngineEnv(process.env), stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr?.on('data', (c: Buffer) => {
    stderr = (stderr + c.toString()).slice(-4000);
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  if (child.pid === undefined) throw new Error(`could not spawn ${bin.binary_path}: ${stderr}`);
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    pid: child.pid,
    binaryPath: bin.binary_path,
    modelPath,
    args,
    child,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
  };
}
