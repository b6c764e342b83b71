import { LogController, type FastifyReply, type FastifyRequest } from 'fastify';

function debugEnabled(reply: FastifyReply): boolean {
  const log = reply.log as { isLevelEnabled?: (level: string) => boolean };
  return log.isLevelEnabled?.('debug') ?? true;
}

/**
 * Per-request access lines at `debug` (`LLORCH_LOG_LEVEL=debug` brings them back). At `info`,
 * orchestratord narrates tasks (admitted, placed, ended) and refusals; two access lines per
 * request said nothing those lines don't and cost more than the rest of an admission's logging.
 * Errors still log at `error`.
 */
export class AccessLogController extends LogController {
  override incomingRequest(): void {}

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    if (error) {
      reply.log.error(
        {
          err: error,
          method: request.method,
          url: request.url,
          status: reply.statusCode,
          response_ms: reply.elapsedTime,
        },
        'request errored',
      );
    } else if (debugEnabled(reply)) {
      reply.log.debug(
        { method: request.method, url: request.url, status: reply.statusCode, response_ms: reply.elapsedTime },
        'request completed',
      );
    }
  }
}
