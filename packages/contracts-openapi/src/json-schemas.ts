import { z } from 'zod';
import { HandoffFileSchema, PoolManagerConfigSchema } from '@llama-orch/contracts';

/** JSON Schemas for the files operators and other tools write by hand, by file name. */
export function renderJsonSchemas(): Map<string, string> {
  const out = new Map<string, string>();
  const entries: Array<[string, z.ZodType]> = [
    ['handoff-file.schema.json', HandoffFileSchema],
    // the config is validated on its input side: defaults are optional to the person writing YAML
    ['pool-managerd-config.schema.json', PoolManagerConfigSchema],
  ];
  for (const [file, schema] of entries) {
    const json = z.toJSONSchema(schema, { io: 'input', target: 'draft-2020-12', unrepresentable: 'any' });
    out.set(file, `${JSON.stringify(json, null, 2)}\n`);
  }
  return out;
}
