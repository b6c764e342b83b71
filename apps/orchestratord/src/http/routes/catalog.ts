import {
  AvailabilitySchema,
  CatalogLoadRequestSchema,
  CatalogRegisterRequestSchema,
  CatalogUnloadRequestSchema,
  ClusterModelListSchema,
  ClusterModelSchema,
  type ClusterModel,
} from '@llama-orch/contracts';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { clusterModel, groupModels, groupOf } from '../../catalog/cluster-models.js';
import { isStaticPool, poolKey, poolNames } from '../../catalog/fleet.js';
import { modelNotFound } from '../../catalog/model-not-found.js';
import { ConflictError, NotFoundError } from '../../errors.js';
import type { CatalogModelEntry } from '../../store/catalog-store.js';
import type { ServicesOptions } from '../app-services.js';

const ModelParams = z.object({ id: z.string().min(1) });
/** `POST …/load` and `…/unload` take their body (contracts) or none at all. */
const LoadBody = CatalogLoadRequestSchema.nullish();
const UnloadBody = CatalogUnloadRequestSchema.nullish();

/**
 * The fleet catalog (.specs/67-models-on-demand.md): register, list, read and delete models served
 * on demand, and load or unload copies of them. Every model is listed once: catalog entries and
 * the models static pools serve.
 */
export const catalogRoutes: FastifyPluginAsyncZod<ServicesOptions> = async (app, { services }) => {
  const { registry, catalog, models } = services;

  /** The model a name stands for, as it is now (a catalog entry read fresh, or the pools that serve it). */
  const describe = async (name: string, entry?: CatalogModelEntry): Promise<ClusterModel> => {
    const found = entry ?? (await catalog.get(name));
    const group = groupOf(groupModels(found === undefined ? [] : [found], registry.pools()), found?.id ?? name);
    if (group === undefined) throw modelNotFound(name);
    return clusterModel(group);
  };

  app.get('/v2/catalog/models', { schema: { response: { 200: ClusterModelListSchema } } }, async () => ({
    models: groupModels(await catalog.list(), registry.pools()).map(clusterModel),
  }));

  app.get(
    '/v2/catalog/models/:id',
    { schema: { params: ModelParams, response: { 200: ClusterModelSchema } } },
    async (req) => describe(req.params.id),
  );

  app.post(
    '/v2/catalog/models',
    { schema: { body: CatalogRegisterRequestSchema, response: { 200: ClusterModelSchema, 201: ClusterModelSchema } } },
    async (req, reply) => {
      const { ref, sha256, aliases, ...policy } = req.body;
      // A name a static pool serves as another model would make one name mean two models.
      for (const name of [ref, ...aliases]) {
        const other = registry
          .pools()
          .find((p) => isStaticPool(p) && poolNames(p).includes(name) && !p.models.includes(ref));
        if (other !== undefined)
          throw new ConflictError(
            `'${name}' is a name of model '${other.models[0] ?? '?'}', which static pool ${poolKey(other)} serves; choose another ${name === ref ? 'ref' : 'alias'}`,
          );
      }
      const put = await catalog.put({ ref, sha256, aliases, policy });
      if (put.kind === 'conflict')
        throw new ConflictError(
          `'${put.name}' is already a name of catalog model '${put.owner}'; delete it there first`,
        );
      req.log.info(
        {
          model: ref,
          aliases,
          outcome: put.kind,
          human: `${put.kind === 'created' ? 'Registered' : 'Updated'} model '${ref}' in the catalog`,
        },
        'catalog register',
      );
      return reply.code(put.kind === 'created' ? 201 : 200).send(await describe(ref, put.entry));
    },
  );

  app.delete('/v2/catalog/models/:id', { schema: { params: ModelParams } }, async (req, reply) => {
    const removed = await catalog.delete(req.params.id);
    if (removed === undefined) {
      if (registry.pools().some((p) => poolNames(p).includes(req.params.id)))
        throw new NotFoundError(
          `'${req.params.id}' is not a catalog entry (models of a node's config are managed on the node)`,
        );
      throw modelNotFound(req.params.id);
    }
    req.log.info(
      { model: removed.id, human: `Removed model '${removed.id}' from the catalog; loaded copies keep serving` },
      'catalog delete',
    );
    return reply.code(204).send();
  });

  app.post(
    '/v2/catalog/models/:id/load',
    { schema: { params: ModelParams, body: LoadBody, response: { 202: ClusterModelSchema } } },
    async (req, reply) => {
      const outcome = await models.load(req.params.id, { node: req.body?.node });
      req.log.info(
        {
          model: req.params.id,
          outcome: outcome.kind,
          human:
            outcome.kind === 'started'
              ? `Load of model '${req.params.id}' started on node ${outcome.node_id} (pool ${outcome.pool_id})`
              : `Model '${req.params.id}' is already loading; nothing asked`,
        },
        'catalog load',
      );
      return reply.code(202).send(await describe(req.params.id));
    },
  );

  app.post(
    '/v2/catalog/models/:id/unload',
    { schema: { params: ModelParams, body: UnloadBody, response: { 202: ClusterModelSchema } } },
    async (req, reply) => {
      await models.unload(req.params.id, {
        node: req.body?.node,
        ...(req.body?.deadline_ms !== undefined ? { deadlineMs: req.body.deadline_ms } : {}),
      });
      return reply.code(202).send(await describe(req.params.id));
    },
  );

  app.get('/v2/catalog/availability', { schema: { response: { 200: AvailabilitySchema } } }, async () => ({
    models: groupModels(await catalog.list(), registry.pools()).map((g) => ({
      model: g.id,
      ready_pools: g.pools
        .filter((p) => p.node_state === 'online' && p.state === 'ready' && p.ready && !p.draining)
        .map((p) => p.pool_id),
      provisioning_pools: g.pools
        .filter((p) => p.node_state !== 'offline' && (p.state === 'provisioning' || p.state === 'starting'))
        .map((p) => p.pool_id),
    })),
  }));
};
