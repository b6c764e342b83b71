import type { Frame, TaskTrace } from './task-client.js';

/**
 * How an admitted task ended, as the client saw it:
 * - `completed`: `end` without cancel; `canceled`: `end {canceled: true}` after our cancel;
 * - `disconnected`: we dropped the stream and the resumed frame log ends with `end {canceled: true}`;
 * - `cancel_raced` / `disconnect_raced`: the task had already finished (natural `end` or `error`)
 *   when the cancel/disconnect reached orchestratord;
 * - `error`: an `error` frame (engine killed, node lost, orchestratord shutting down, …);
 * - `lost_to_restart`: the stream (or its resume) got 404 / a connection error / a close without
 *   terminal, and orchestratord was restarted between admission and that moment;
 * - `hung`, `no_terminal`: failures.
 */
export type TaskOutcome =
  | 'completed'
  | 'canceled'
  | 'disconnected'
  | 'cancel_raced'
  | 'disconnect_raced'
  | 'error'
  | 'lost_to_restart'
  | 'hung'
  | 'no_terminal';

export interface TaskVerdict {
  outcome: TaskOutcome;
  /** Terminal frame the client saw (first one), if any. */
  terminal: Frame | undefined;
  /** Invariant violations; empty = the task behaved. */
  problems: string[];
  /** For `lost_to_restart`: what the client saw (`stream_404`, `stream_error`, `closed_without_terminal`, `resume_404`, …). */
  detail?: string;
}

const TERMINAL = new Set(['end', 'error']);

/** Restarts of orchestratord: [stop began, new one listening]. */
export interface RestartWindow {
  begunAt: number;
  listeningAt: number;
}

function touchedByRestart(trace: TaskTrace, restarts: readonly RestartWindow[]): boolean {
  return restarts.some((r) => trace.postedAt < r.listeningAt && trace.endedAt >= r.begunAt);
}

/** Checks the frame grammar of one stream: started first, contiguous token indexes, one terminal, nothing after it. */
function grammarProblems(frames: readonly Frame[], fromResume: boolean, firstTokenIndex: number): string[] {
  const problems: string[] = [];
  if (!fromResume && frames.length > 0 && frames[0]?.event !== 'started')
    problems.push(`first frame is '${frames[0]?.event}', not 'started'`);
  let expectI = firstTokenIndex;
  let terminalAt = -1;
  frames.forEach((f, idx) => {
    if (terminalAt >= 0) {
      problems.push(`${f.event} frame after the terminal frame`);
      return;
    }
    if (f.event === 'token') {
      if (f.data.i !== expectI) problems.push(`token index ${String(f.data.i)} where ${expectI} was expected`);
      expectI += 1;
    }
    if (f.event === 'started' && idx > 0) problems.push('second started frame');
    if (TERMINAL.has(f.event)) terminalAt = idx;
  });
  const ids = frames.map((f) => Number(f.id));
  for (let k = 1; k < ids.length; k++) {
    if (!(ids[k] === (ids[k - 1] as number) + 1)) {
      problems.push(`frame ids not consecutive: ${ids[k - 1]} then ${ids[k]}`);
      break;
    }
  }
  return problems;
}

/** Classifies one admitted task and lists every invariant it broke. */
export function judgeTask(trace: TaskTrace, restarts: readonly RestartWindow[]): TaskVerdict {
  const problems: string[] = [];
  const restartTouched = touchedByRestart(trace, restarts);
  const tokens = trace.frames.filter((f) => f.event === 'token').length;
  problems.push(...grammarProblems(trace.frames, false, 0));
  if (trace.framesAfterTerminal > 0) problems.push(`${trace.framesAfterTerminal} frame(s) after the terminal frame`);
  const resumeFrames = trace.resume?.frames ?? [];
  if (resumeFrames.length > 0) problems.push(...grammarProblems(resumeFrames, true, tokens).map((p) => `resume: ${p}`));
  const allTokens = tokens + resumeFrames.filter((f) => f.event === 'token').length;
  if (allTokens > trace.plan.maxTokens)
    problems.push(`${allTokens} token frames for max_tokens ${trace.plan.maxTokens}`);

  const terminal = [...trace.frames, ...resumeFrames].find((f) => TERMINAL.has(f.event));
  const canceledEnd = terminal?.event === 'end' && terminal.data.canceled === true;
  const lostDetail = (): string => {
    const r = trace.resume;
    if (r !== undefined && trace.disconnectedAt !== undefined)
      return r.status !== undefined ? `resume_${r.status}` : 'resume_error';
    if (trace.streamStatus !== undefined && trace.streamStatus !== 200) return `stream_${trace.streamStatus}`;
    if (trace.streamError !== undefined) return 'stream_error';
    return 'closed_without_terminal';
  };
  const verdict = (outcome: TaskOutcome): TaskVerdict => ({
    outcome,
    terminal,
    problems,
    ...(outcome === 'lost_to_restart' ? { detail: lostDetail() } : {}),
  });

  if (trace.hung) {
    problems.push(`no terminal frame within the client timeout (${trace.frames.length} frames seen)`);
    return verdict('hung');
  }
  if (terminal?.event === 'end' && terminal.data.canceled === true && trace.plan.action === 'none') {
    problems.push('end {canceled: true} for a task nobody canceled');
  }
  if (terminal?.event === 'error') {
    const code = terminal.data.code;
    if (
      typeof code !== 'string' ||
      typeof terminal.data.message !== 'string' ||
      typeof terminal.data.retriable !== 'boolean'
    ) {
      problems.push(`error frame without code/message/retriable: ${JSON.stringify(terminal.data)}`);
    }
  }

  if (trace.plan.action === 'cancel' && trace.cancel !== undefined) {
    const c = trace.cancel;
    if (c.status === 404 || c.error !== undefined) {
      if (!restartTouched) problems.push(`cancel answered ${c.status ?? c.error} without an orchestratord restart`);
    } else if (c.status !== 204) problems.push(`cancel answered ${c.status}`);
    if (terminal === undefined) {
      if (restartTouched) return verdict('lost_to_restart');
      problems.push('canceled task saw no terminal frame');
      return verdict('no_terminal');
    }
    if (canceledEnd) return verdict('canceled');
    // The task ended on its own before the cancel was processed: a natural end, or a failure.
    if (terminal.event === 'end' && !['eos', 'limit', 'word'].includes(String(terminal.data.stop_type))) {
      problems.push(
        `canceled task ended with end stop_type ${String(terminal.data.stop_type)} but without canceled: true`,
      );
    }
    return verdict('cancel_raced');
  }

  if (trace.plan.action === 'disconnect' && trace.disconnectedAt !== undefined) {
    const r = trace.resume;
    if (terminal !== undefined) {
      if (canceledEnd) return verdict('disconnected');
      if (terminal.event === 'end' && !['eos', 'limit', 'word'].includes(String(terminal.data.stop_type))) {
        problems.push(
          `disconnected task ended with end stop_type ${String(terminal.data.stop_type)} but without canceled: true`,
        );
      }
      return verdict('disconnect_raced');
    }
    if (restartTouched) return verdict('lost_to_restart');
    problems.push(`disconnected task: resume gave ${r?.status ?? r?.error ?? 'nothing'} and no terminal frame`);
    return verdict('no_terminal');
  }

  if (terminal !== undefined) return verdict(terminal.event === 'end' ? 'completed' : 'error');
  if (trace.streamStatus === 404 && trace.streamCode !== 'NOT_FOUND')
    problems.push(`stream 404 without a NOT_FOUND envelope (${trace.streamCode ?? 'no code'})`);
  if (restartTouched) return verdict('lost_to_restart');
  if (trace.streamStatus !== undefined && trace.streamStatus !== 200)
    problems.push(`stream answered ${trace.streamStatus} ${trace.streamCode ?? ''} without a restart`);
  else if (trace.streamError !== undefined) problems.push(`stream failed without a restart: ${trace.streamError}`);
  else problems.push('stream closed without a terminal frame');
  return verdict('no_terminal');
}
