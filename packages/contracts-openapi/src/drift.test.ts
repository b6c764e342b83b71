import { readFile, readdir } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { renderJsonSchemas, renderOpenApi, renderServedDocuments } from './index.js';

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');

describe('checked-in contracts match the schemas', () => {
  it.each([
    ['openapi', renderOpenApi()],
    ['schemas', renderJsonSchemas()],
  ] as const)('contracts/%s has no drift (run `pnpm contracts:gen`)', async (dir, generated) => {
    const onDisk = (await readdir(join(repoRoot, 'contracts', dir))).sort();
    expect(onDisk).toEqual([...generated.keys()].sort());
    for (const [name, text] of generated) {
      expect(await readFile(join(repoRoot, 'contracts', dir, name), 'utf8'), `${dir}/${name}`).toBe(text);
    }
  });

  it('the documents the daemons serve have no drift (run `pnpm contracts:gen`)', async () => {
    for (const [path, text] of renderServedDocuments())
      expect(await readFile(join(repoRoot, path), 'utf8'), path).toBe(text);
  });

  it('documents every route with its error envelope and the TaskRequest body', () => {
    const dataPlane = parse(renderOpenApi().get('data-plane.yaml') ?? '') as {
      paths: Record<string, Record<string, { responses: Record<string, unknown> }>>;
      components: { schemas: Record<string, { additionalProperties?: unknown }> };
    };
    expect(Object.keys(dataPlane.paths)).toContain('/v2/tasks');
    expect(Object.keys(dataPlane.paths['/v2/tasks']?.post?.responses ?? {})).toEqual(
      expect.arrayContaining(['202', '400', '401', '429', '503']),
    );
    // strict objects become closed schemas, so generated clients reject unknown keys too
    expect(dataPlane.components.schemas.TaskRequest?.additionalProperties).toBe(false);
    expect(Object.keys(dataPlane.components.schemas)).toEqual(
      expect.arrayContaining(['SseStarted', 'SseToken', 'SseEnd', 'SseError', 'SseMetrics']),
    );
    // With Accept: text/event-stream the admission answers 200 with the stream.
    expect(Object.keys((dataPlane.paths['/v2/tasks']?.post?.responses['200'] as { content: object }).content)).toEqual([
      'text/event-stream',
    ]);
  });

  it('documents the /v1 door: its paths, JSON and stream answers, and OpenAI-shaped errors', () => {
    const doc = parse(renderOpenApi().get('openai.yaml') ?? '') as {
      paths: Record<
        string,
        Record<string, { responses: Record<string, { content?: Record<string, { schema: { $ref?: string } }> }> }>
      >;
    };
    expect(Object.keys(doc.paths).sort()).toEqual([
      '/v1/chat/completions',
      '/v1/completions',
      '/v1/models',
      '/v1/models/{id}',
      '/v1/responses',
      '/v1/responses/{id}',
      '/v1/responses/{id}/cancel',
      '/v1/responses/{id}/input_items',
    ]);
    const chat = doc.paths['/v1/chat/completions']?.post?.responses ?? {};
    expect(Object.keys(chat['200']?.content ?? {}).sort()).toEqual(['application/json', 'text/event-stream']);
    expect(chat['200']?.content?.['text/event-stream']?.schema.$ref).toBe('#/components/schemas/ChatCompletionChunk');
    for (const status of ['400', '401', '404', '429', '503'])
      expect(chat[status]?.content?.['application/json']?.schema.$ref, status).toBe('#/components/schemas/OpenAiError');
  });

  it("documents the catalog routes and the node's loads on request with their statuses", () => {
    type Doc = {
      paths: Record<
        string,
        Record<string, { responses: Record<string, unknown>; requestBody?: { required: boolean } }>
      >;
    };
    const statuses = (doc: Doc, path: string, method: string) =>
      Object.keys(doc.paths[path]?.[method]?.responses ?? {}).sort();
    const control = parse(renderOpenApi().get('control-plane.yaml') ?? '') as Doc;
    expect(statuses(control, '/v2/catalog/models', 'post')).toEqual(['200', '201', '400', '401', '403', '409']);
    expect(statuses(control, '/v2/catalog/models/{id}', 'get')).toEqual(['200', '401', '403', '404']);
    expect(statuses(control, '/v2/catalog/models/{id}', 'delete')).toEqual(['204', '401', '403', '404']);
    expect(statuses(control, '/v2/catalog/models/{id}/load', 'post')).toEqual([
      '202',
      '400',
      '401',
      '403',
      '404',
      '409',
      '500',
      '502',
      '503',
    ]);
    expect(statuses(control, '/v2/catalog/models/{id}/unload', 'post')).toEqual([
      '202',
      '400',
      '401',
      '403',
      '404',
      '409',
      '500',
      '503',
    ]);
    // load and unload take their body or none
    expect(control.paths['/v2/catalog/models/{id}/load']?.post?.requestBody?.required).toBe(false);
    const node = parse(renderOpenApi().get('pool-managerd.yaml') ?? '') as Doc;
    expect(statuses(node, '/v2/pools', 'post')).toEqual(['202', '400', '401', '409', '503']);
    expect(statuses(node, '/v2/pools/{id}', 'delete')).toEqual(['202', '400', '401', '404', '409', '503']);
  });
});
