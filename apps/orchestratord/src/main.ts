#!/usr/bin/env node
import closeWithGrace from 'close-with-grace';
import { destination, pino } from 'pino';
import { REDACT_PATHS } from './app.js';
import { loadConfig } from './config.js';
import { ConfigError } from './errors.js';
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
// Asynchronous destination: lines are written off the event loop, and under load the ones that
// arrive while a write is in flight go out together. At thousands of admissions a second, one
// synchronous write(2) per line cost as much as the HTTP responses. pino flushes it on exit.
const logger = pino(
  { name: 'orchestratord', level: config.log_level, redact: { paths: REDACT_PATHS, censor: '[redacted]' } },
  destination({ dest: 1, sync: false }),
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
