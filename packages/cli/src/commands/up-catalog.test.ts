import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO } from '../testing/up-cluster.js';
import { catalogFileEnv } from './up-catalog.js';

describe('catalogFileEnv', () => {
  const dir = mkdtempSync(join(tmpdir(), 'llorch-catalog-'));
  const catalog = join(REPO, 'requirements', 'catalog.yaml');
  const dev = join(REPO, 'requirements', 'cpu-dev.yaml');

  it('gives orchestratord the default catalog when the node loads models on request (cpu-dev.yaml does)', () => {
    expect(catalogFileEnv(catalog, dev, {})).toEqual({ ORCHD_CATALOG_FILE: catalog });
  });

  it("leaves the environment's choice, an empty one (no catalog) included", () => {
    expect(catalogFileEnv(catalog, dev, { ORCHD_CATALOG_FILE: '/etc/mine.yaml' })).toEqual({});
    expect(catalogFileEnv(catalog, dev, { ORCHD_CATALOG_FILE: '' })).toEqual({});
    expect(catalogFileEnv(undefined, dev, {})).toEqual({});
  });

  it('gives nothing for a node without on_demand (no node could load them) or a config it cannot read', () => {
    const staticOnly = join(dir, 'static.yaml');
    writeFileSync(staticOnly, readFileSync(dev, 'utf8').replace(/^on_demand:\n(  .*\n)+/m, ''));
    expect(readFileSync(staticOnly, 'utf8')).not.toMatch(/^on_demand:/m);
    expect(catalogFileEnv(catalog, staticOnly, {})).toEqual({});
    expect(catalogFileEnv(catalog, join(REPO, 'requirements', 'two-pool.yaml'), {})).toEqual({});
    expect(catalogFileEnv(catalog, join(dir, 'missing.yaml'), {})).toEqual({});
    const bad = join(dir, 'bad.yaml');
    writeFileSync(bad, 'pools: [');
    expect(catalogFileEnv(catalog, bad, {})).toEqual({});
  });
});
