/**
 * The package graph is one-way (ARCHITECTURE.md, Processes): contracts at the leaf, packages above it, apps on
 * top, the e2e harness apart (HTTP only). Inside each app, folders by capability are layered one
 * way (ARCHITECTURE.md, Layers): a folder imports only folders below it, peers on one layer not each other,
 * and only `http/` (plus the app factory) knows Fastify. `pnpm lint` fails on any violation.
 */

/** Test code (tests, harnesses, fixtures, in-app benches) may reach across layers. */
const testCode = (src) => ['[.]test[.]ts$', `${src}(testing|fixtures|bench)/`];

/**
 * Rules for one app. `layers`: top to bottom; each entry is the folders of one layer (peers).
 * `src/`'s own files: the roots (entry, factory, daemon wiring, index) that no folder may import,
 * and the leaves (config, errors) that every folder may.
 */
function appLayers(app, layers, roots) {
  const src = `^apps/${app}/src/`;
  const exempt = testCode(src);
  const folders = (names) => `${src}(${names.join('|')})/`;
  const rules = [];
  layers.forEach((layer, i) => {
    const above = layers.slice(0, i).flat();
    if (above.length > 0) {
      rules.push({
        name: `${app}-layers-${layer.join('-')}`,
        severity: 'error',
        comment: `${layer.join(', ')} sit below ${above.join(', ')} and must not import them (ARCHITECTURE.md, Layers).`,
        from: { path: folders(layer), pathNot: exempt },
        to: { path: folders(above) },
      });
    }
    for (const peer of layer) {
      const others = layer.filter((p) => p !== peer);
      if (others.length === 0) continue;
      rules.push({
        name: `${app}-peers-${peer}`,
        severity: 'error',
        comment: `${peer} and ${others.join(', ')} are peers on one layer: neither imports the other.`,
        from: { path: folders([peer]), pathNot: exempt },
        to: { path: folders(others) },
      });
    }
  });
  rules.push(
    {
      name: `${app}-only-http-knows-fastify`,
      severity: 'error',
      comment: 'Routes, plugins and hooks live in http/; the capability folders below it are plain objects.',
      from: { path: src, pathNot: [`${src}http/`, `${src}(${roots.join('|')})[.]ts$`, ...exempt] },
      to: { path: 'node_modules/(fastify|fastify-plugin|fastify-type-provider-zod|@fastify/[^/]+)/' },
    },
    {
      name: `${app}-folders-never-import-roots`,
      severity: 'error',
      comment: `Nothing in a folder imports the app's roots (${roots.join(', ')}): they assemble the folders.`,
      from: { path: `${src}[^/]+/`, pathNot: exempt },
      to: { path: `${src}(${roots.join('|')})[.]ts$` },
    },
    {
      name: `${app}-product-never-imports-test-code`,
      severity: 'error',
      comment: 'Product code never imports tests, harnesses or fixtures.',
      from: { path: src, pathNot: exempt },
      to: { path: `${src}(testing|fixtures|bench)/` },
    },
    {
      name: `${app}-product-never-imports-the-fixture-node`,
      severity: 'error',
      comment: 'The fixture pool-managerd is for tests and benches; product code never imports it.',
      from: { path: src, pathNot: exempt },
      to: { path: '^packages/fixture-pool-manager/' },
    },
    {
      name: `${app}-src-top-level`,
      severity: 'error',
      comment:
        'src/ keeps only the entry, app factory, daemon wiring, config, errors and index; the rest lives in capability folders.',
      from: {
        path: `${src}[^/]+[.]ts$`,
        pathNot: [`${src}(${[...roots, 'config', 'errors'].join('|')})[.]ts$`, ...exempt],
      },
      to: {},
    },
  );
  return rules;
}

/**
 * Entries a package declares in its package.json `exports` besides `.`, imported by that subpath
 * (never by file): daemon-support's `./argv` imports node built-ins only, so a daemon's main answers
 * --help/--version before it loads anything else; `./tracing` keeps @opentelemetry/api out of what
 * imports the main entry without tracing; `./redis-server` (node built-ins only) starts a real
 * redis-server for the store tests and the replicas benchmark; `./daemon-launcher` starts the
 * daemons for the benchmarks and the test suites; `./otlp-receiver` receives the daemons' traces in
 * tests.
 */
const SUBPATH_ENTRIES = [
  '^packages/daemon-support/src/argv\\.ts$',
  '^packages/daemon-support/src/tracing/index\\.ts$',
  '^packages/daemon-support/src/testing/redis-server\\.ts$',
  '^packages/daemon-support/src/testing/debian-package\\.ts$',
  '^packages/daemon-support/src/testing/daemon-launcher\\.ts$',
  '^packages/daemon-support/src/testing/otlp-receiver\\.ts$',
];

module.exports = {
  forbidden: [
    ...appLayers(
      'orchestratord',
      [
        ['http'],
        ['dashboard', 'replicas'],
        ['anthropic', 'responses'],
        ['openai', 'tasks'],
        ['admission'],
        ['scheduling'],
        ['prefix'],
        ['registry'],
        ['upstream', 'streams', 'sessions', 'catalog'],
        ['store'],
        ['support'],
      ],
      ['main', 'app', 'server', 'index'],
    ),
    ...appLayers(
      'pool-managerd',
      [
        ['http'],
        ['pools'],
        ['operations'],
        ['replicas'],
        ['provisioning', 'handoff', 'node'],
        ['supervision'],
        ['support'],
      ],
      ['main', 'app', 'daemon', 'index'],
    ),

    {
      name: 'dashboard-page-runs-in-a-browser',
      severity: 'error',
      comment:
        'The page (packages/dashboard/web) runs in the browser: no Node built-ins, and of the workspace only contracts (for types).',
      from: { path: '^packages/dashboard/web/', pathNot: '[.]test[.]tsx?$' },
      to: { dependencyTypes: ['core'] },
    },
    {
      name: 'dashboard-page-only-contracts',
      severity: 'error',
      comment: 'The page reads the product over HTTP; of the workspace it imports only contracts (types).',
      from: { path: '^packages/dashboard/web/' },
      to: { path: '^(apps|packages|test-harness)/', pathNot: '^packages/(contracts|dashboard/web)/' },
    },

    {
      name: 'no-circular',
      severity: 'error',
      comment: 'Import cycles make start-up order and mocks fragile.',
      from: {},
      to: { circular: true },
    },
    {
      name: 'contracts-only-zod',
      severity: 'error',
      comment: 'packages/contracts depends only on zod (and node built-ins).',
      from: { path: '^packages/contracts/', pathNot: '[.]test[.]ts$' },
      to: {
        dependencyTypes: [
          'npm',
          'npm-dev',
          'npm-optional',
          'npm-peer',
          'npm-no-pkg',
          'npm-unknown',
          'unknown',
          'undetermined',
        ],
        pathNot: '/zod/',
      },
    },
    {
      name: 'contracts-no-workspace',
      severity: 'error',
      comment: 'contracts is the leaf of the workspace graph.',
      from: { path: '^packages/contracts/' },
      to: { path: '^(apps|packages|test-harness)/', pathNot: '^packages/contracts/' },
    },
    {
      name: 'packages-never-import-apps',
      severity: 'error',
      comment: 'Nothing depends on an app.',
      from: { path: '^(packages|test-harness|bench)/' },
      to: { path: '^apps/' },
    },
    {
      name: 'apps-never-import-apps',
      severity: 'error',
      comment: 'Apps talk over HTTP, never by import.',
      from: { path: '^apps/([^/]+)/' },
      to: { path: '^apps/', pathNot: '^apps/$1/' },
    },
    {
      name: 'e2e-http-only',
      severity: 'error',
      comment:
        'The e2e harness talks to the product over HTTP only; test tooling (installing Debian packages, starting redis-server, launching the daemons as processes, receiving their traces) is not the product.',
      from: { path: '^test-harness/' },
      to: {
        path: '^(apps|packages)/',
        pathNot:
          '^packages/daemon-support/src/testing/(debian-package|redis-server|daemon-launcher|otlp-receiver)\\.ts$',
      },
    },
    {
      name: 'no-deep-imports',
      severity: 'error',
      comment: 'Import another package by its name (its index.ts), never its src/ or dist/ files.',
      from: { path: '^(apps|packages|test-harness|bench)/([^/]+)/' },
      to: {
        path: '^(apps|packages|test-harness)/([^/]+)/(src|dist)/',
        pathNot: ['^$1/$2/', '^(apps|packages|test-harness)/[^/]+/src/index\\.ts$', ...SUBPATH_ENTRIES],
      },
    },
    {
      name: 'no-relative-cross-package',
      severity: 'error',
      comment: 'Workspace packages are imported by name, not by ../../ paths.',
      from: { path: '^(apps|packages|test-harness)/([^/]+)/' },
      to: { dependencyTypes: ['local'], path: '^(apps|packages|test-harness)/', pathNot: '^$1/$2/' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '(^|/)(dist|node_modules|\\.cache)/' },
    tsConfig: { fileName: 'tsconfig.base.json' },
    tsPreCompilationDeps: true,
    combinedDependencies: true,
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['source', 'import', 'default'],
      extensions: ['.ts', '.tsx', '.js', '.mjs', '.json'],
    },
    moduleSystems: ['es6', 'cjs'],
  },
};
