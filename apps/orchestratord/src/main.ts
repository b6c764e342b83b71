#!/usr/bin/env node
import { installGracefulExit, logDestination, parseDaemonArgv } from '@llama-orch/daemon-support';
import { startTracing } from '@llama-orch/daemon-support/tracing';
import { pino } from 'pino';
import { REDACT_PATHS, type OrchdApp } from './app.js';
import { argvSpec, packageVersion } from './support/argv.js';
import { readCatalogFile, seedCatalog, type CatalogFile } from './catalog/catalog-seed.js';
import { loadConfig } from './config.js';
import { loadCredentials } from './http/credentials.js';
import { ConfigError } from './errors.js';
import { startServer, stopBudgetMs } from './server.js';

// Entry point: the only place that reads the environment, owns the root logger and handles signals.

// --help / --version / a wrong argument: answered before anything starts.
const argv = parseDaemonArgv(process.argv.slice(2), argvSpec());
if (argv.action === 'exit') {
  if (argv.stdout !== undefined) process.stdout.write(argv.stdout);
  if (argv.stderr !== undefined) process.stderr.write(argv.stderr);
  process.exit(argv.code);
}

// Buffered and asynchronous (out at 4 KB or within 100 ms); never blocks or throws (it puts a
// pipe or socket stdout in non-blocking mode), so a stdout reader that is gone or a pipe nobody
// reads cannot stop the shutdown. Flushed (bounded) on exit.
const destination = logDestination(1, { flushMs: 100 });
process.once('exit', () => destination.flushSync());

let config;
let credentials;
let catalogFile: CatalogFile | undefined;
try {
  config = loadConfig({ env: process.env });
  credentials = loadCredentials({ config, env: process.env });
  catalogFile = config.catalog_file === undefined ? undefined : readCatalogFile(config.catalog_file);
} catch (err) {
  if (err instanceof ConfigError) {
    pino({ name: 'orchestratord' }, destination).fatal({ code: err.code, problems: err.problems }, err.message);
    process.exit(1);
  }
  throw err;
}
const logger = pino(
  { name: 'orchestratord', level: config.log_level, redact: { paths: REDACT_PATHS, censor: '[redacted]' } },
  destination,
);
const seed = catalogFile;
let server;
try {
  // Off (nothing of the SDK loaded) unless an OTEL_* variable configures an OTLP endpoint; settings
  // it cannot honour (grpc …) stop the start here.
  const tracing = await startTracing({
    serviceName: 'orchestratord',
    serviceVersion: packageVersion(),
    env: process.env,
    logger,
    closeTimeoutMs: 2000,
  });
  server = await startServer({
    config,
    logger,
    credentials,
    tracing,
    // the models of ORCHD_CATALOG_FILE that the catalog lacks, before the first request can look
    beforeListen: async (app: OrchdApp) => {
      if (seed !== undefined) await seedCatalog(app.services.catalog, seed, logger.child({ component: 'catalog' }));
    },
  });
} catch (err) {
  logger.fatal({ err }, 'failed to start');
  process.exit(1);
}
const running = server;
installGracefulExit({
  // SIGTERM/SIGINT to exit: the drain and the close sequence, each bounded (server.ts), plus a margin
  graceMs: stopBudgetMs(config) + 1000,
  log: logger,
  shutdown: async ({ err }) => {
    if (err !== undefined) logger.error({ err }, 'fatal error; shutting down');
    // each failed step is logged by the close sequence itself
    // a signal drains first; after a fatal error this process is not trusted to go on serving
    const report = await (err === undefined ? running.stop() : running.close());
    if (report.failed.length > 0) return false;
    logger.info('stopped');
    return true;
  },
});
