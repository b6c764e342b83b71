export {
  startCluster,
  repoRoot,
  proofRoot,
  engineUrlOf,
  engineIdle,
  cancelOutcome,
  correlatedMessages,
  placedPool,
  waitClusterIdle,
} from './cluster.js';
export type { CancelOutcome } from './cluster.js';
export type { Cluster, ClusterOptions, JsonLogLine } from './cluster.js';
export { runHaiku, haikuPrompt, haikuRequest, directBody } from './haiku-client.js';
export type { HaikuRun, HaikuOptions } from './haiku-client.js';
export { recordStream, directCompletion } from './sse-recorder.js';
export type { RecordedFrame } from './sse-recorder.js';
export { scrape, metricSum } from './metrics.js';
export { minuteWord, countWord } from './minute-words.js';
export { writeProofBundle } from './proof-bundle.js';
export type { Check } from './proof-bundle.js';
export { directChat } from './engine-chat.js';
export type { DirectChat } from './engine-chat.js';
