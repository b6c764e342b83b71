/**
 * The package graph is one-way (CONVENTIONS §1): contracts at the leaf, packages above it, apps on
 * top, the e2e harness apart (HTTP only). `pnpm lint` fails on any violation.
 */
module.exports = {
  forbidden: [
    { name: 'no-circular', severity: 'error', comment: 'Import cycles make start-up order and mocks fragile.',
      from: {}, to: { circular: true } },
    { name: 'contracts-only-zod', severity: 'error', comment: 'packages/contracts depends only on zod (and node built-ins).',
      from: { path: '^packages/contracts/', pathNot: '[.]test[.]ts$' },
      to: { dependencyTypes: ['npm', 'npm-dev', 'npm-optional', 'npm-peer', 'npm-no-pkg', 'npm-unknown', 'unknown', 'undetermined'], pathNot: '/zod/' } },
    { name: 'contracts-no-workspace', severity: 'error', comment: 'contracts is the leaf of the workspace graph.',
      from: { path: '^packages/contracts/' }, to: { path: '^(apps|packages|test-harness)/', pathNot: '^packages/contracts/' } },
    { name: 'packages-never-import-apps', severity: 'error', comment: 'Nothing depends on an app.',
      from: { path: '^(packages|test-harness|bench)/' }, to: { path: '^apps/' } },
    { name: 'apps-never-import-apps', severity: 'error', comment: 'Apps talk over HTTP, never by import.',
      from: { path: '^apps/([^/]+)/' }, to: { path: '^apps/', pathNot: '^apps/$1/' } },
    { name: 'e2e-http-only', severity: 'error', comment: 'The e2e harness talks to the product over HTTP only.',
      from: { path: '^test-harness/' }, to: { path: '^(apps|packages)/' } },
    { name: 'no-deep-imports', severity: 'error', comment: 'Import another package by its name (its index.ts), never its src/ or dist/ files.',
      from: { path: '^(apps|packages|test-harness|bench)/([^/]+)/' },
      to: { path: '^(apps|packages|test-harness)/([^/]+)/(src|dist)/', pathNot: ['^$1/$2/', '^(apps|packages|test-harness)/[^/]+/src/index\\.ts$'] } },
    { name: 'no-relative-cross-package', severity: 'error', comment: 'Workspace packages are imported by name, not by ../../ paths.',
      from: { path: '^(apps|packages|test-harness)/([^/]+)/' },
      to: { dependencyTypes: ['local'], path: '^(apps|packages|test-harness)/', pathNot: '^$1/$2/' } },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '(^|/)(dist|node_modules|\\.cache)/' },
    tsConfig: { fileName: 'tsconfig.base.json' },
    tsPreCompilationDeps: true,
    combinedDependencies: true,
    enhancedResolveOptions: { exportsFields: ['exports'], conditionNames: ['source', 'import', 'default'], extensions: ['.ts', '.js', '.mjs', '.json'] },
    moduleSystems: ['es6', 'cjs'],
  },
};
