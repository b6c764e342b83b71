import type { Bench } from '../lib/context.js';
import { admissionBench } from './admission.js';
import { relayBench } from './relay.js';

/** Run order: the real-engine benchmarks first (the first one may build llama-server). */
export const BENCH_ORDER: readonly string[] = ['relay', 'admission'];

export const BENCHES: Readonly<Record<string, Bench>> = {
  relay: relayBench,
  admission: admissionBench,
};
