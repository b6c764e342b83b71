import { spawn, type ChildProcess } from 'node:child_process';
import pino from 'pino';
import { ensureCpuTestEngine, findFreePort, scrubEngineEnv, testCacheDir } from '@llama-orch/engine-provisioner';
import { ModelProvisioner } from '@llama-orch/model-provisioner';
import { LlamaServerClient } from '@llama-orch/llamacpp-adapter';

/** A llama-server started "by hand" (as an operator would), outside any pool-managerd. */
export interface ExternalEngine {
  url: string;
  pid: number;
  modelPath: string;
  args: string[];
  child: ChildProcess;
  stop(): Promise<void>;
}

export async function startExternalEngine(opts: { slots?: number; ctx?: number } = {}): Promise<ExternalEngine> {
  const logger = pino({ level: 'warn' }, pino.destination(2));
  const bin = await ensureCpuTestEngine(logger);
  const models = new ModelProvisioner({ cacheDir: testCacheDir(), logger, progressTty: false });
  const modelPath = (await models.ensure('synthetic:llama')).local_path;
  await models.close();
  const port = await findFreePort();
  const args = [
    '-m',
    modelPath,
    '--host',
    '127.0.0.1',
    '--port',
    String(port),
    '-c',
    String(opts.ctx ?? 1024),
    '-np',
    String(opts.slots ?? 1),
    '--no-webui',
    '-t',
    '1',
  ];
  const child = spawn(bin.binary_path, args, { env: scrubEngineEnv(process.env), stdio: 'ignore' });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  if (child.pid === undefined) throw new Error('spawn failed');
  const url = `http://127.0.0.1:${port}`;
  const client = new LlamaServerClient({ baseUrl: url });
  const deadline = Date.now() + 60_000;
  while ((await client.health()) !== 'ready') {
    if (Date.now() > deadline || child.exitCode !== null) throw new Error('external llama-server did not become ready');
    await new Promise((r) => setTimeout(r, 20));
  }
  await client.close();
  return {
    url,
    pid: child.pid,
    modelPath,
    args,
    child,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
  };
}
