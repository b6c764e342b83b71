#!/usr/bin/env node
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadJsonSchemaFormat, parseCommandLine, type CommandLine } from './args.js';
import { paintFor } from './color.js';
import { CliError, UsageError } from './errors.js';
import { cancelTask, drainPool, reloadPool } from './commands/pool-ops.js';
import { listModels, loadModel, renderModels, unloadModel } from './commands/models.js';
import { listNodes, renderNodes, renderStatus, statusDocument } from './commands/status.js';
import { submit } from './commands/submit.js';
import { getTask, listTasks, renderTask, renderTasks } from './commands/tasks.js';
import { up } from './commands/up.js';
import { cliVersion } from './version.js';

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const env = process.env;
const out = (text: string): void => {
  process.stdout.write(`${text}\n`);
};
const json = (doc: unknown): void => out(JSON.stringify(doc, null, 2));

async function main(argv: string[]): Promise<number> {
  const cmd = parseCommandLine(argv, env);
  if (cmd.command === 'help') {
    out(cmd.text);
    return 0;
  }
  if (cmd.command === 'version') {
    out(`llorch ${cliVersion()}`);
    return 0;
  }
  // First Ctrl-C: stop what runs (submit cancels its task, up stops the daemons); second: force
  // (up kills the daemons and returns; everything else leaves now).
  const controller = new AbortController();
  const force = new AbortController();
  const onSignal = (): void => {
    if (!controller.signal.aborted) return controller.abort();
    if (cmd.command !== 'up') process.exit(130);
    force.abort();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  try {
    return await run(cmd, controller.signal, force.signal);
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}

async function run(
  cmd: Exclude<CommandLine, { command: 'help' | 'version' }>,
  signal: AbortSignal,
  force: AbortSignal,
): Promise<number> {
  const paint = paintFor(process.stdout, env);
  switch (cmd.command) {
    case 'up':
      await up({
        repoRoot,
        config: resolve(cmd.config ?? join(repoRoot, 'requirements', 'cpu-dev.yaml')),
        catalogFile: join(repoRoot, 'requirements', 'catalog.yaml'),
        addr: cmd.addr,
        token: cmd.token,
        cacheDir: env.LLORCH_CACHE_DIR ?? join(repoRoot, '.cache', 'llama-orch'),
        out: process.stdout,
        signal,
        force,
        ...(process.stdout.isTTY ? { progressTty: process.stdout } : {}),
        readyTimeoutMs: 30 * 60_000,
        paint,
        replicas: cmd.replicas,
        stateDir: cmd.stateDir === undefined ? join(repoRoot, '.cache', 'llorch-up') : resolve(cmd.stateDir),
      });
      return force.aborted ? 130 : 0;
    case 'submit': {
      const { jsonSchemaFile, sampling, ...rest } = cmd.submit;
      const responseFormat = jsonSchemaFile === undefined ? undefined : await loadJsonSchemaFormat(jsonSchemaFile);
      const result = await submit(cmd.target, {
        ...rest,
        sampling: responseFormat === undefined ? sampling : { ...sampling, response_format: responseFormat },
        out: process.stdout,
        err: process.stderr,
        signal,
        json: cmd.json,
      });
      if (cmd.json) json(result);
      return result.interrupted ? 130 : 0;
    }
    case 'status': {
      const doc = await statusDocument(cmd.target);
      if (cmd.json) json(doc);
      else out(renderStatus(doc, paint));
      return 0;
    }
    case 'nodes': {
      const nodes = await listNodes(cmd.target);
      if (cmd.json) json({ nodes });
      else out(renderNodes(nodes, paint));
      return 0;
    }
    case 'models': {
      const models = await listModels(cmd.target);
      if (cmd.json) json({ models });
      else out(renderModels(models, paint));
      return 0;
    }
    case 'tasks': {
      const list = await listTasks(cmd.target, cmd.filters, cmd.limit);
      if (cmd.json) json(list);
      else out(renderTasks(list.tasks, paint));
      return 0;
    }
    case 'task': {
      const task = await getTask(cmd.target, cmd.taskId);
      if (cmd.json) json(task);
      else out(renderTask(task));
      return 0;
    }
    case 'cancel':
      out(await cancelTask(cmd.target, cmd.taskId));
      return 0;
    case 'drain':
      out(await drainPool(cmd.target, cmd.poolId, cmd.deadlineMs));
      return 0;
    case 'reload':
      out(await reloadPool(cmd.target, cmd.poolId, cmd.modelRef, { sha256: cmd.sha256, deadlineMs: cmd.deadlineMs }));
      return 0;
    case 'load':
      out(await loadModel(cmd.target, cmd.model, cmd.node));
      return 0;
    case 'unload':
      out(await unloadModel(cmd.target, cmd.model, { node: cmd.node, deadlineMs: cmd.deadlineMs }));
      return 0;
  }
}

/** Every failure is one line on stderr (a usage error adds the usage); never a stack trace. */
function report(err: unknown): number {
  const paint = paintFor(process.stderr, env);
  const firstLine = (text: string): string => text.split('\n')[0] ?? text;
  const prefix = `llorch: ${paint.red('error')}:`;
  if (err instanceof UsageError) {
    process.stderr.write(`llorch: ${firstLine(err.message)}\n\n${err.usage}\n`);
    return err.exitCode;
  }
  if (err instanceof CliError) {
    process.stderr.write(`${paint.enabled ? prefix : 'llorch:'} ${firstLine(err.message)}\n`);
    return err.exitCode;
  }
  const message = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
  process.stderr.write(`llorch: internal error: ${firstLine(message)}\n`);
  return 1;
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    process.exitCode = report(err);
  },
);
