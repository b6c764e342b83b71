import { TaskRequestSchema, type AdmissionResponse } from '@llama-orch/contracts';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { ServicesOptions } from '../services.js';

/** `POST /v2/tasks`: validate, check the model against the registry, enqueue, 202 with absolute stream URLs. */
export const admissionRoutes: FastifyPluginAsyncZod<ServicesOptions> = async (app, { services }) => {
  app.post('/v2/tasks', {
    // No response schema: the reply is built from typed values below, and re-validating it with zod
    // on every admission cost more than the rest of the handler. The OpenAPI document keeps it.
    schema: { body: TaskRequestSchema },
  }, (req, reply) => {
    // A plain function, not async: an async handler costs a promise and a microtask turn per admission.
    const result = services.dispatcher.admit(req.body, req.log);
    const base = `${services.publicBase(req)}/v2/tasks/${encodeURIComponent(result.task_id)}/events`;
    // Fields written out rather than `{ ...result, streams }`: a spread followed by more properties
    // gets a new hidden class per object in V8, and every reply then misses Fastify's inline caches.
    const body: AdmissionResponse = {
      task_id: result.task_id,
      queue_position: result.queue_position,
      predicted_start_ms: result.predicted_start_ms,
      backoff_ms: result.backoff_ms,
      preparation: result.preparation,
      streams: { sse: base, sse_verbose: `${base}?verbose=true` },
    };
    if (result.dispatched) {
      // The dispatch to the node is written later in this turn of the event loop (undici writes on a
      // kept connection from setImmediate; HTTP/2 from a native immediate). Answering after it puts
      // the node and engine to work before the client's 202: the client's stream request still comes
      // long before the first token, and time to first token no longer pays for the 202.
      setImmediate(() => reply.code(202).send(body));
    } else {
      reply.code(202).send(body);
    }
  });
};
