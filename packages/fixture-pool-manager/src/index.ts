// FIXTURE package: a stand-in pool-managerd for tests and benchmarks. Product code never imports it.
export { FixturePoolManager } from './fixture-pool-manager.js';
export type {
  FixtureBehaviour,
  FixtureDispatch,
  FixturePoolManagerOptions,
  FixturePoolSpec,
} from './fixture-options.js';
export { FixtureFleet } from './fixture-fleet.js';
export type { FixtureFleetMode, FixtureFleetOptions, FixtureFleetState } from './fixture-fleet.js';
export type { TokenText } from './token-text.js';
