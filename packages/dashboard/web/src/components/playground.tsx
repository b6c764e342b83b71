import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import type { DashboardSnapshot } from '@llama-orch/contracts';
import type { ApiClient } from '../lib/api.js';
import { streamChat } from '../lib/chat-stream.js';
import { modelChoices } from '../lib/models.js';

type Phase = 'idle' | 'streaming' | 'done' | 'stopped' | 'error';

/**
 * Try a model: one prompt streamed through `/v1/chat/completions` (the same queue, placement and
 * relay every client gets). The reply grows in an `aria-live` log that is `aria-busy` while
 * streaming, so a screen reader reads it once it is complete rather than token by token.
 */
export function Playground({ snapshot, api }: { snapshot: DashboardSnapshot; api: ApiClient }) {
  const choices = useMemo(() => modelChoices(snapshot), [snapshot]);
  const [model, setModel] = useState('');
  const [prompt, setPrompt] = useState('Write a haiku about GPUs.');
  const [maxTokens, setMaxTokens] = useState('64');
  const [output, setOutput] = useState('');
  const [phase, setPhase] = useState<Phase>('idle');
  const [message, setMessage] = useState('');
  const controller = useRef<AbortController | undefined>(undefined);
  const form = useRef<HTMLFormElement>(null);
  // a choice that disappeared (its pool went away) falls back to the first one offered
  const chosen = choices.includes(model) ? model : (choices[0] ?? '');

  useEffect(() => () => controller.current?.abort(new Error('the page went away')), []);

  const send = async (e: Event): Promise<void> => {
    e.preventDefault();
    if (phase === 'streaming' || !chosen) return;
    const ctl = new AbortController();
    controller.current = ctl;
    setOutput('');
    setPhase('streaming');
    setMessage(`Streaming from ${chosen}…`);
    try {
      const r = await streamChat(
        api,
        { model: chosen, prompt, max_tokens: Number(maxTokens) },
        (piece) => setOutput((o) => o + piece),
        ctl.signal,
      );
      setPhase('done');
      setMessage(`Done: ${r.completion_tokens ?? '?'} tokens, finish reason ${r.finish_reason ?? 'unknown'}.`);
    } catch (err) {
      if (ctl.signal.aborted) {
        setPhase('stopped');
        setMessage('Stopped.');
      } else {
        setPhase('error');
        setMessage(`Failed: ${err instanceof Error ? err.message : String(err)}`);
      }
    } finally {
      if (controller.current === ctl) controller.current = undefined;
    }
  };

  const streaming = phase === 'streaming';
  return (
    <section class="card" aria-labelledby="playground-heading">
      <h2 id="playground-heading">Playground</h2>
      <form ref={form} onSubmit={send} class="playground">
        <p class="field">
          <label for="pg-model">Model</label>
          <select
            id="pg-model"
            value={chosen}
            disabled={choices.length === 0}
            onChange={(e) => setModel(e.currentTarget.value)}
          >
            {choices.length === 0 ? (
              <option value="">no model is served</option>
            ) : (
              choices.map((m) => (
                <option key={m} value={m}>
                  {m}
                </option>
              ))
            )}
          </select>
        </p>
        <p class="field">
          <label for="pg-max">Max tokens</label>
          <input
            id="pg-max"
            type="number"
            min={1}
            max={4096}
            step={1}
            required
            value={maxTokens}
            onInput={(e) => setMaxTokens(e.currentTarget.value)}
          />
        </p>
        <p class="field wide">
          <label for="pg-prompt">Prompt</label>
          <textarea
            id="pg-prompt"
            rows={3}
            required
            value={prompt}
            aria-describedby="pg-hint"
            onInput={(e) => setPrompt(e.currentTarget.value)}
            onKeyDown={(e) => {
              if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) form.current?.requestSubmit();
            }}
          />
          <span id="pg-hint" class="muted">
            Ctrl+Enter sends.
          </span>
        </p>
        <p class="buttons">
          <button type="submit" disabled={streaming || !chosen}>
            Send
          </button>
          <button type="button" disabled={!streaming} onClick={() => controller.current?.abort(new Error('stopped'))}>
            Stop
          </button>
        </p>
      </form>
      <p class="playground-status" role="status" data-phase={phase}>
        {message}
      </p>
      <h3 id="pg-output-label">Reply</h3>
      <div
        id="pg-output"
        class="output"
        role="log"
        aria-live="polite"
        aria-busy={streaming}
        aria-labelledby="pg-output-label"
        data-phase={phase}
      >
        {output}
      </div>
    </section>
  );
}
