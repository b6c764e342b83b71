#!/usr/bin/env node
import closeWithGrace from 'close-with-grace';
import { pino } from 'pino';
import { REDACT_PATHS } from './app.js';
import { loadConfig } from './config.js';
import { ConfigError } from './errors.js';
import { bufferedLogDestination } from './log-destination.js';
import { startServer } from './server.js';

// Entry point: the only place that reads the environment, owns the root logger and handles signals.
const bootLogger = pino({ name: 'orchestratord' });
let config;
try {
  config = loadConfig({ env: process.env });
} catch (err) {
  if (err instanceof ConfigError) {
    bootLogger.fatal({ problems: err.problems }, err.message);
    process.exit(1);
  }
  throw err;
}
// Buffered and asynchronous: lines go out at 4 KB or after LOG_FLUSH_MS (see log-destination.ts).
const LOG_FLUSH_MS = 100;
const logDestination = bufferedLogDestination(1, LOG_FLUSH_MS);
const logger = pino(
  { name: 'orchestratord', level: config.log_level, redact: { paths: REDACT_PATHS, censor: '[redacted]' } },
  logDestination,
);
let server;
try {
  server = await startServer({ config, logger });
} catch (err) {
  logger.fatal({ err }, 'failed to start');
  process.exit(1);
}
const running = server;
closeWithGrace({ delay: 10_000, logger: { error: (m: unknown) => logger.error({ detail: String(m) }, 'close-with-grace') } }, async ({ signal, err }) => {
  if (err !== undefined) logger.error({ err }, 'fatal error; shutting down');
  else logger.info({ signal }, 'shutting down');
  await running.close();
  logger.info('stopped');
});
