import {
  DEFAULT_POOL_CAPABILITIES,
  taskCapability,
  type ErrorCode,
  type PoolCapability,
  type TaskRequest,
} from '@llama-orch/contracts';
import { BudgetSpentError, DeadlineUnmetError, InvalidParamsError, ModelNotAvailableError } from '../errors.js';
import { modelAvailability, type ModelAvailability } from './model-availability.js';
import { mayServe, type PoolView } from '../registry/pool-view.js';
import { DEADLINE_MARGIN, missesDeadline, type Prediction, type Predictor } from './predictor.js';
import { predictTask } from './prediction.js';

export interface AdmissionCheckInput {
  readonly request: TaskRequest;
  /** The pools that list the task's model (`NodeRegistry.poolsForModel`), or every pool: same result, more work. */
  readonly views: readonly PoolView[];
  readonly predictor: Predictor;
  /** Tasks for the same model queued ahead of where this one would go. */
  readonly ahead: number;
  /** Largest ctx accepted when no pool reports one. */
  readonly ctxMax: number;
  /** Tokens left in the session's budget; undefined = unlimited. */
  readonly budgetRemaining: number | undefined;
  /** Suggested back-off for MODEL_NOT_AVAILABLE, ms. */
  readonly retryAfterMs: number;
  /** Called with the refusal's code before it is thrown (metrics). */
  readonly onReject: (code: ErrorCode) => void;
  /**
   * The model no pool lists waits for room on a node (a catalog model, spec 67): what a copy of it
   * will serve, checked instead of the pools'. Absent = a model no pool lists is refused.
   */
  readonly awaiting?: { readonly ctx: number; readonly capabilities: readonly PoolCapability[] } | undefined;
}

export interface AdmissionCheckResult {
  readonly availability: ModelAvailability;
  readonly prediction: Prediction;
}

/** What the checks that do not read the queue or the session found: the pools that list the model. */
export interface ServedCheck {
  readonly availability: ModelAvailability;
  /** Ready and provisioning pools of the model (on nodes not offline). */
  readonly listed: readonly PoolView[];
}

type ServedInput = Omit<AdmissionCheckInput, 'predictor' | 'ahead' | 'budgetRemaining'>;
type QueuedInput = Pick<AdmissionCheckInput, 'request' | 'predictor' | 'ahead' | 'budgetRemaining' | 'onReject'>;

/**
 * The live-cluster checks of admission, in order: the model is served or being provisioned by a
 * pool on a node that is not offline (else 503 MODEL_NOT_AVAILABLE); one of those pools serves the
 * task's kind (chat, completion, embeddings, rerank, infill: else 400 INVALID_PARAMS, `param:
 * model`); `ctx` fits the largest ctx of
 * those pools (else 400 INVALID_PARAMS); the session budget is not spent (else 429
 * ADMISSION_REJECT, policy `budget`); the measured predicted end at the fastest recent pace is within
 * the deadline plus {@link DEADLINE_MARGIN} of it (else 400 DEADLINE_UNMET, see `missesDeadline`).
 */
export function checkAdmission(input: AdmissionCheckInput): AdmissionCheckResult {
  const served = checkServed(input);
  return { availability: served.availability, prediction: checkQueued(input, served.listed) };
}

/** The checks before the queue and the session are read: model, kind, ctx (see {@link checkAdmission}). */
export function checkServed(input: ServedInput): ServedCheck {
  const { request } = input;
  const availability = modelAvailability(input.views, request.model_ref);
  const listed = [...availability.ready, ...availability.provisioning];
  if (listed.length === 0 && input.awaiting !== undefined) {
    checkAwaiting(input, input.awaiting);
    return { availability, listed };
  }
  if (listed.length === 0) {
    input.onReject('MODEL_NOT_AVAILABLE');
    throw new ModelNotAvailableError(`model '${request.model_ref}' is not served or provisioned by any pool`, {
      retryAfterMs: input.retryAfterMs,
    });
  }
  const kind = taskCapability(request);
  if (!listed.some((p) => mayServe(p, kind))) {
    input.onReject('INVALID_PARAMS');
    const served = [...new Set(listed.flatMap((p) => p.capabilities ?? DEFAULT_POOL_CAPABILITIES))].join(', ');
    throw new InvalidParamsError(`model '${request.model_ref}' cannot serve ${kind}: its pools serve ${served}`, {
      param: 'model',
    });
  }
  const poolCtx = Math.max(0, ...listed.map((p) => p.ctx));
  const ctxLimit = poolCtx > 0 ? poolCtx : input.ctxMax;
  if (request.ctx > ctxLimit) {
    input.onReject('INVALID_PARAMS');
    throw new InvalidParamsError(
      `ctx: ${request.ctx} exceeds ctx_max ${ctxLimit} of the pools serving '${request.model_ref}'`,
    );
  }
  return { availability, listed };
}

/** Kind and ctx of a task whose model waits for room, against what its copy will serve. */
function checkAwaiting(
  input: ServedInput,
  awaiting: { readonly ctx: number; readonly capabilities: readonly PoolCapability[] },
): void {
  const { request } = input;
  const kind = taskCapability(request);
  if (!awaiting.capabilities.includes(kind)) {
    input.onReject('INVALID_PARAMS');
    throw new InvalidParamsError(
      `model '${request.model_ref}' cannot serve ${kind}: it serves ${awaiting.capabilities.join(', ')}`,
      { param: 'model' },
    );
  }
  if (request.ctx > awaiting.ctx) {
    input.onReject('INVALID_PARAMS');
    throw new InvalidParamsError(`ctx: ${request.ctx} exceeds ctx ${awaiting.ctx} of model '${request.model_ref}'`);
  }
}

/** The checks on what the queue and the session hold: budget, then deadline (see {@link checkAdmission}); the prediction when they pass. */
export function checkQueued(input: QueuedInput, listed: readonly PoolView[]): Prediction {
  const { request } = input;
  if (input.budgetRemaining !== undefined && input.budgetRemaining <= 0) {
    input.onReject('ADMISSION_REJECT');
    throw new BudgetSpentError(`session ${request.session_id} has spent its token budget`, { retryAfterMs: 1000 });
  }
  const prediction = predictTask(input.predictor, request, input.ahead, listed);
  if (missesDeadline(prediction, request.deadline_ms)) {
    input.onReject('DEADLINE_UNMET');
    throw new DeadlineUnmetError(
      `deadline_ms ${request.deadline_ms} cannot be met: predicted start in ${prediction.startMs} ms, end in ${prediction.finishMs ?? '?'} ms, ` +
        `at the fastest recent pace ${prediction.fastFinishMs ?? '?'} ms (over the deadline by more than ${DEADLINE_MARGIN * 100}%; ${input.ahead} task(s) ahead for '${request.model_ref}')`,
    );
  }
  return prediction;
}

/** Counts of tasks ahead past which a search for the deadline's limit stops: more than this many ahead is treated as unlimited. */
const AHEAD_SEARCH_LIMIT = 1 << 20;

/**
 * The most tasks of its model the task may wait behind and still pass the deadline check: -1 when
 * it misses even first in line, undefined when no count refuses it (an unmeasured prediction, or a
 * deadline beyond any queue). A shared store refuses past it in the admission's own step, so the
 * check and the enqueue are one round trip. Rests on the prediction growing with `ahead`.
 * `hint`: a count to try first (the queue's capacity), so a lenient deadline costs two predictions.
 */
export function maxAheadForDeadline(
  predictor: Predictor,
  request: TaskRequest,
  listed: readonly PoolView[],
  hint: number,
): number | undefined {
  const misses = (ahead: number): boolean =>
    missesDeadline(predictTask(predictor, request, ahead, listed), request.deadline_ms);
  let lo = -1;
  let hi = Math.max(0, Math.min(hint, AHEAD_SEARCH_LIMIT));
  if (!misses(hi)) {
    if (!misses(AHEAD_SEARCH_LIMIT)) return undefined;
    lo = hi;
    hi = AHEAD_SEARCH_LIMIT;
  }
  // misses(hi) holds, and lo is -1 or passes: narrow to the last count that passes.
  while (hi - lo > 1) {
    const mid = Math.floor((lo + hi) / 2);
    if (misses(mid)) hi = mid;
    else lo = mid;
  }
  return lo;
}
