import {
  AvailabilitySchema,
  CatalogRegisterRequestSchema,
  ClusterModelListSchema,
  ClusterModelSchema,
  type ClusterModel,
} from '@llama-orch/contracts';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { NotFoundError } from '../../errors.js';
import { modelAvailability } from '../../admission/model-availability.js';
import { candidateKey } from '../../registry/pool-view.js';
import type { ServicesOptions } from '../app-services.js';

const ModelParams = z.object({ id: z.string().min(1) });

/** Cluster catalog: models from heartbeats + registered interest; availability per model. */
export const catalogRoutes: FastifyPluginAsyncZod<ServicesOptions> = async (app, { services }) => {
  const { registry, catalog, clock } = services;

  const allModels = (): string[] => {
    const names = new Set<string>();
    for (const v of registry.pools()) for (const m of v.models) names.add(m);
    for (const i of catalog.list()) names.add(i.ref);
    return [...names].sort();
  };

  const describe = (model: string): ClusterModel => {
    const views = registry.pools();
    const avail = modelAvailability(views, model);
    const listing = views.filter((v) => v.models.includes(model));
    const interest = catalog.get(model);
    const status: ClusterModel['status'] =
      avail.ready.length > 0
        ? 'ready'
        : avail.provisioning.length > 0
          ? 'loading'
          : listing.length > 0
            ? 'failed'
            : 'registered';
    const aliases = [...new Set(listing.flatMap((v) => v.aliases ?? []))].sort();
    const entry: ClusterModel = {
      id: model,
      ref: model,
      status,
      pools: listing.map(candidateKey),
      aliases,
      registered: interest !== undefined,
      pinned: listing.some((v) => v.snapshot.origin !== 'catalog'),
    };
    if (interest?.sha256 !== undefined) entry.sha256 = interest.sha256;
    return entry;
  };

  app.get('/v2/catalog/models', { schema: { response: { 200: ClusterModelListSchema } } }, async () => ({
    models: allModels().map(describe),
  }));

  app.post(
    '/v2/catalog/models',
    {
      schema: { body: CatalogRegisterRequestSchema, response: { 202: ClusterModelSchema } },
    },
    async (req, reply) => {
      await catalog.register(req.body, new Date(clock.now()));
      req.log.info({ ref: req.body.ref, human: `Registered interest in model '${req.body.ref}'` }, 'catalog register');
      return reply.code(202).send(describe(req.body.ref));
    },
  );

  app.delete('/v2/catalog/models/:id', { schema: { params: ModelParams } }, async (req, reply) => {
    if (!(await catalog.delete(req.params.id))) {
      throw new NotFoundError(
        `catalog entry '${req.params.id}' not found (only registered entries can be deleted; models reported by nodes are managed on the nodes)`,
      );
    }
    return reply.code(204).send();
  });

  app.get('/v2/catalog/availability', { schema: { response: { 200: AvailabilitySchema } } }, async () => {
    const views = registry.pools();
    return {
      models: allModels().map((model) => {
        const avail = modelAvailability(views, model);
        return {
          model,
          ready_pools: avail.ready
            .filter((v) => v.node_state === 'online' && v.ready && !v.draining)
            .map((v) => v.pool_id),
          provisioning_pools: avail.provisioning.map((v) => v.pool_id),
        };
      }),
    };
  });
};
