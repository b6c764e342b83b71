import { rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
import { launchChromium } from './browser/launch.js';
import { dashboardArtifactsDir, saveScreenshot } from './browser/artifacts.js';
import { repoRoot, startCluster, type Cluster } from './index.js';

// The web dashboard in a real browser (Debian's chromium, driven by playwright-core) against a
// real cluster: orchestratord with an API token, one pool-managerd, the real llama-server with the
// synthetic model under the alias `synthetic`; the node also has memory for models on demand, and a
// catalog model is loaded and unloaded while the page watches. The page is orchestratord's own
// (`GET /`), built by `pnpm build` into packages/dashboard/dist/web. Screenshots go to
// .artifacts/dashboard/.
const MODEL = 'synthetic:llama';
const ALIAS = 'synthetic';
/** A catalog model loaded on request (an embedder, as requirements/catalog.yaml has it). */
const ON_DEMAND = 'synthetic:llama?role=embed';
const NODE = 'e2e-node-1';
const GiB = 1024 ** 3;
/** A cold load: the model generated (first run), an engine started; far above it on a loaded host. */
const LOAD_MS = 120_000;
const cacheDir = process.env.LLORCH_TEST_CACHE_DIR ?? join(repoRoot(), '.cache', 'llama-orch');
/** Waits in the page: generous, the suite must pass on a loaded 2-core CI machine. */
const UI_TIMEOUT_MS = 60_000;

let cluster: Cluster;
let browser: Browser;
let page: Page;
const pageErrors: string[] = [];

beforeAll(async () => {
  // this run's screenshots only (a failure's shot from an earlier run would mislead)
  await rm(dashboardArtifactsDir(), { recursive: true, force: true });
  // the browser first: installing it (apt-get) is the slow part on a fresh machine, the cluster
  // is quick once the engine is cached
  browser = await launchChromium();
  cluster = await startCluster({
    model: MODEL,
    nodes: 1,
    gpu: 'off',
    cacheDir,
    heartbeatMs: 500,
    readyTimeoutMs: 30 * 60_000,
    pools: [{ aliases: [ALIAS] }],
    onDemand: { memory_budget_bytes: 2 * GiB, threads: 1 },
  });
  page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  page.setDefaultTimeout(UI_TIMEOUT_MS);
  page.on('pageerror', (err) => pageErrors.push(String(err)));
}, 31 * 60_000);

afterAll(async () => {
  await browser?.close();
  await cluster?.close();
}, 60_000);

/** On failure, a screenshot of what the page showed. */
function screenshotOnFailure(name: string): void {
  onTestFailed(async () => {
    await saveScreenshot(page, `failed-${name}`).catch(() => undefined);
  });
}

// Page-side expressions as strings (this package is type-checked without the DOM library).
/** axe-core's WCAG 2.0/2.1 A and AA rules over the whole document: the violations, briefly. */
const AXE_WCAG2_VIOLATIONS = `axe.run(document, { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'] } })
  .then((r) => r.violations.map((v) => ({ id: v.id, impact: v.impact, targets: v.nodes.slice(0, 3).map((n) => JSON.stringify(n.target)) })))`;
/** The focused element's accessible name, roughly: aria-label, else its <label>, else its text. */
const FOCUSED_NAME = `(() => {
  const el = document.activeElement;
  if (el === null) return '';
  const label = el.id !== '' ? document.querySelector('label[for="' + el.id + '"]')?.textContent : undefined;
  return (el.getAttribute('aria-label') ?? label ?? el.textContent ?? '').trim();
})()`;

const poolRow = (poolId: string) => page.locator(`tr[data-pool="${poolId}"]`);

/** One call to orchestratord's API with the cluster's key: status and JSON body. */
async function api(
  method: 'GET' | 'POST',
  path: string,
  body?: object,
): Promise<{ status: number; json: Record<string, unknown> }> {
  const res = await request(new URL(path, cluster.orchestrator.url), {
    method,
    headers: {
      authorization: `Bearer ${cluster.token}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: res.statusCode, json: (await res.body.json()) as Record<string, unknown> };
}
const MARKER = 'window.__llorchDashboardMarker';

describe('dashboard page in chromium against a real cluster', () => {
  it('orchestratord serves the built page at / without a key', async () => {
    const res = await request(`${cluster.orchestrator.url}/`);
    const html = await res.body.text();
    expect(res.statusCode, html.slice(0, 500)).toBe(200);
    expect(res.headers['content-type']).toMatch(/text\/html/);
    expect(html, 'the page is not built: run `pnpm build`').toContain('/dashboard/assets/');
  });

  it('asks for the API key, keeps it for the tab, then shows the node, the pool and the model', async () => {
    screenshotOnFailure('key-and-cluster');
    await page.goto(`${cluster.orchestrator.url}/`);
    const keyInput = page.getByLabel('API key', { exact: true });
    await keyInput.waitFor();
    expect(await keyInput.getAttribute('type')).toBe('password');
    await expect
      .poll(() => page.locator('.connection').getAttribute('data-state'), { timeout: UI_TIMEOUT_MS })
      .toBe('needs_key');
    await saveScreenshot(page, '01-asks-for-key');

    await keyInput.fill(cluster.token);
    await page.getByRole('button', { name: 'Use key' }).click();
    await page.locator('tr[data-node="e2e-node-1"] [data-state="online"]').waitFor();
    await poolRow('p1').locator('[data-state="ready"]').waitFor();
    const row = await poolRow('p1').innerText();
    expect(row).toContain('e2e-node-1');
    expect(row).toContain(MODEL);
    expect(row).toContain(ALIAS);
    expect(await page.evaluate('sessionStorage.getItem("llorch.apiKey")')).toBe(cluster.token);
    expect(await page.getByLabel('API key', { exact: true }).count()).toBe(0);

    // a reload keeps the key (sessionStorage): no form, straight to the data
    await page.reload();
    await poolRow('p1').locator('[data-state="ready"]').waitFor();
    expect(await page.getByLabel('API key', { exact: true }).count()).toBe(0);
    await expect
      .poll(() => page.locator('.connection').getAttribute('data-state'), { timeout: UI_TIMEOUT_MS })
      .toBe('live');
    // one orchestratord: the Replicas section lists it, at the address it listens on
    const replica = page.locator('tr[data-replica]');
    await replica.first().waitFor();
    expect(await replica.count()).toBe(1);
    expect(await replica.innerText()).toContain(cluster.orchestrator.url);
    await saveScreenshot(page, '02-cluster');
  });

  it("shows the node's on-demand memory as a meter with the node's own figures and its models; a load and an unload appear in the live feed", async () => {
    screenshotOnFailure('models-on-demand');
    const node = page.locator(`tr[data-node="${NODE}"]`);
    const meter = node.getByRole('meter', { name: `On-demand memory of ${NODE}` });
    await meter.waitFor();
    /** Whether the bar shows what `GET /v2/nodes` says now (engines' measured memory moves between heartbeats: polled). */
    const meterShowsTheNode = async (): Promise<string> => {
      const { json } = await api('GET', '/v2/nodes');
      const memory = (
        json.nodes as Array<{ node_id: string; memory?: { budget_bytes: number; used_bytes: number } }>
      ).find((n) => n.node_id === NODE)?.memory;
      const shown = [await meter.getAttribute('aria-valuemax'), await meter.getAttribute('aria-valuenow')];
      const want = memory && [String(memory.budget_bytes), String(Math.min(memory.used_bytes, memory.budget_bytes))];
      return JSON.stringify(shown) === JSON.stringify(want)
        ? 'same'
        : `page ${shown.join('/')} vs node ${JSON.stringify(memory)}`;
    };
    await expect.poll(meterShowsTheNode, { timeout: UI_TIMEOUT_MS, interval: 100 }).toBe('same');
    expect(await meter.getAttribute('aria-valuemax')).toBe(String(2 * GiB));
    // the figures in words, beside the bar and as its value text
    const valueText = await meter.getAttribute('aria-valuetext');
    expect(valueText).toMatch(/^[\d.]+ [KMG]?i?B of 2\.0 GiB used \(\d+%\)$/);
    expect(await node.locator('.memory-text').innerText()).toBe(valueText);
    // the static pool is listed as the node's, static
    expect(await node.locator('[data-model-pool="p1"]').getAttribute('data-origin')).toBe('config');
    expect(await node.locator('[data-model-pool="p1"]').innerText()).toContain('static');

    const put = await api('POST', '/v2/catalog/models', {
      ref: ON_DEMAND,
      aliases: ['embedder'],
      serve: 'embeddings',
      ctx: 1024,
    });
    expect(put.status, JSON.stringify(put.json)).toBe(201);
    const load = await api('POST', '/v2/catalog/models/embedder/load');
    expect(load.status, JSON.stringify(load.json)).toBe(202);
    // the feed shows the load start, then the copy ready, on the node, without a reload
    const started = page.locator('tr[data-model-event="load_started"]', { hasText: ON_DEMAND });
    await started.waitFor();
    expect(await started.innerText()).toContain(NODE);
    await page.locator('tr[data-model-event="load_ready"]', { hasText: ON_DEMAND }).waitFor({ timeout: LOAD_MS });
    const loaded = node.locator('li[data-origin="catalog"]', { hasText: ON_DEMAND });
    await loaded.waitFor();
    expect(await loaded.innerText()).toContain('on demand');
    // the bar follows the node's figures with the loaded copy too
    await expect.poll(meterShowsTheNode, { timeout: UI_TIMEOUT_MS, interval: 100 }).toBe('same');
    await saveScreenshot(page, '03-models-on-demand');

    const unload = await api('POST', '/v2/catalog/models/embedder/unload', { deadline_ms: 1000 });
    expect(unload.status, JSON.stringify(unload.json)).toBe(202);
    const unloading = page.locator('tr[data-model-event]').first();
    await expect.poll(() => unloading.getAttribute('data-model-event'), { timeout: UI_TIMEOUT_MS }).toBe('unloading');
    expect(await unloading.getAttribute('data-cause')).toBe('operator');
    const row = await unloading.innerText();
    for (const fact of ['unloading (operator)', ON_DEMAND, NODE]) expect(row).toContain(fact);
    // the copy leaves the node's list once the node removed it
    await loaded.waitFor({ state: 'detached', timeout: UI_TIMEOUT_MS });
  });

  it("passes axe-core's WCAG 2 A/AA checks in light and dark, and every control is reachable by keyboard", async () => {
    screenshotOnFailure('accessibility');
    // axe-core (npm) runs inside the page: labels, roles, names, contrast, table headers …
    const axePath = createRequire(import.meta.url).resolve('axe-core/axe.min.js');
    for (const colorScheme of ['light', 'dark'] as const) {
      await page.emulateMedia({ colorScheme });
      await page.addScriptTag({ path: axePath });
      const violations = (await page.evaluate(AXE_WCAG2_VIOLATIONS)) as Array<{
        id: string;
        impact: string;
        targets: string[];
      }>;
      expect(violations, `${colorScheme}: ${JSON.stringify(violations)}`).toEqual([]);
    }
    await page.emulateMedia({ colorScheme: 'light' });

    // Tab from the top of the page: the pool actions and the playground are all reachable.
    await page.locator('body').focus();
    const reached = new Set<string>();
    for (let i = 0; i < 60 && !reached.has('Send'); i++) {
      await page.keyboard.press('Tab');
      const name = String(await page.evaluate(FOCUSED_NAME));
      reached.add(name);
    }
    for (const control of ['Drain p1', 'Reload p1', 'Model', 'Prompt', 'Send'])
      expect([...reached], control).toContain(control);
  });

  it('the playground streams a chat reply into the output, and the task shows up live', async () => {
    screenshotOnFailure('playground');
    await page.evaluate(`${MARKER} = 'set-before-the-playground'`);
    await page.getByLabel('Model', { exact: true }).selectOption(ALIAS);
    await page.getByLabel('Max tokens', { exact: true }).fill('48');
    await page.getByLabel('Prompt', { exact: true }).fill('Write a haiku about the night shift.');
    await page.getByRole('button', { name: 'Send' }).click();
    const status = page.locator('.playground-status');
    // done = the page read `data: [DONE]` (a stream cut short or failed reads `error`, with the reason)
    await expect
      .poll(() => status.getAttribute('data-phase'), { timeout: UI_TIMEOUT_MS })
      .toMatch(/^(done|error|stopped)$/);
    const done = /^Done: (\d+) tokens, finish reason (\w+)\.$/.exec(await status.innerText());
    expect(done, await status.innerText()).not.toBeNull();
    const tokens = Number(done![1]);
    expect(tokens).toBeGreaterThan(0);
    const output = page.locator('#pg-output');
    expect((await output.innerText()).trim().length).toBeGreaterThan(0);
    expect(await output.getAttribute('aria-busy')).toBe('false');

    // the ended task reaches the recent-tasks table through the event stream (no reload): the
    // cluster's only task, under the name the playground used, on p1, with its tokens
    const row = page.locator('tr[data-task]', { hasText: ALIAS });
    await row.locator('.outcome-ok').waitFor();
    expect(await page.locator('tr[data-task]').count()).toBe(1);
    const [model, pool, rowTokens] = (await row.locator('td').allInnerTexts()).slice(0, 3);
    expect([model, pool]).toEqual([ALIAS, 'p1']);
    // the engine's count, as the usage the playground printed
    expect(Number(rowTokens)).toBe(tokens);
    expect(await page.evaluate(MARKER)).toBe('set-before-the-playground');
    // the replica counts the task it relayed (announced every heartbeat interval, shown with the next snapshot)
    await expect
      .poll(() => page.locator('tr[data-replica] [data-stat="tasks-relayed"]').innerText(), { timeout: UI_TIMEOUT_MS })
      .toBe('1');
    await saveScreenshot(page, '04-playground');
  });

  it("a recent task's id opens its record as GET /v2/tasks/{id} has it; a record past its retention says so", async () => {
    screenshotOnFailure('task-record');
    const row = page.locator('tr[data-task]').first();
    const taskId = await row.getAttribute('data-task');
    expect(taskId).not.toBeNull();
    const rowTokens = Number((await row.locator('td').allInnerTexts())[2]);
    // what orchestratord keeps for the task (the playground's, through /v1 chat)
    const { status, json } = await api('GET', `/v2/tasks/${encodeURIComponent(taskId!)}`);
    expect(status, JSON.stringify(json)).toBe(200);
    const record = json as {
      state: string;
      model: string;
      model_ref: string;
      node_id?: string;
      pool_id?: string;
      attempts: number;
      outcome?: { result: string; stop_type?: string };
      usage: { tokens_out: number; tokens_in?: number };
      timings: { queued_ms?: number; first_token_ms?: number; total_ms?: number };
    };
    expect(record).toMatchObject({ state: 'ended', model: ALIAS, node_id: NODE, pool_id: 'p1' });
    expect(record.usage.tokens_out).toBe(rowTokens);

    await row.getByRole('button', { name: `Task ${taskId}` }).click();
    const dialog = page.getByRole('dialog', { name: `Task ${taskId!.slice(0, 8)}` });
    await dialog.waitFor();
    await expect.poll(() => dialog.getAttribute('data-lookup'), { timeout: UI_TIMEOUT_MS }).toBe('found');
    const fact = (key: string) => dialog.locator(`[data-fact="${key}"] dd`).innerText();
    expect(await fact('state')).toBe('ended');
    expect(await fact('model')).toBe(record.model === record.model_ref ? ALIAS : `${ALIAS} (${record.model_ref})`);
    expect(await fact('placement')).toBe(
      `${NODE} / p1 (${record.attempts === 1 ? '1 attempt' : `${record.attempts} attempts`})`,
    );
    const outcome = await fact('outcome');
    expect(outcome.startsWith(record.outcome!.result), outcome).toBe(true);
    if (record.outcome!.stop_type !== undefined) expect(outcome).toContain(record.outcome!.stop_type);
    const usage = await fact('usage');
    expect(usage).toMatch(new RegExp(`\\b${record.usage.tokens_out} generated$`));
    if (record.usage.tokens_in !== undefined)
      expect(usage).toMatch(new RegExp(`^${record.usage.tokens_in} prompt tokens`));
    const timings = await fact('timings');
    for (const [field, words] of [
      ['queued_ms', 'queued '],
      ['first_token_ms', 'first token '],
      ['total_ms', 'total '],
    ] as const)
      expect(timings.includes(words), `${field} in "${timings}"`).toBe(record.timings[field] !== undefined);
    // the open dialog passes axe-core too
    await page.addScriptTag({ path: createRequire(import.meta.url).resolve('axe-core/axe.min.js') });
    expect(await page.evaluate(AXE_WCAG2_VIOLATIONS)).toEqual([]);
    await saveScreenshot(page, '04-task-record', { fullPage: false });
    await page.keyboard.press('Escape');
    await dialog.waitFor({ state: 'detached' });

    // a record gone (past the retention, or another key's): orchestratord's 404, played by the browser
    const route = '**/v2/tasks/*';
    await page.route(route, (r) =>
      r.fulfill({
        status: 404,
        contentType: 'application/json',
        body: JSON.stringify({ code: 'NOT_FOUND', message: 'task not found', retriable: false }),
      }),
    );
    try {
      await row.getByRole('button', { name: `Task ${taskId}` }).click();
      await dialog.waitFor();
      await expect.poll(() => dialog.getAttribute('data-lookup'), { timeout: UI_TIMEOUT_MS }).toBe('gone');
      expect(await dialog.innerText()).toContain('expired or not visible');
      await dialog.getByRole('button', { name: 'Close' }).click();
      await dialog.waitFor({ state: 'detached' });
    } finally {
      await page.unroute(route);
    }
  });

  it('draining the pool from its button changes its state on the page without a reload', async () => {
    screenshotOnFailure('drain');
    await page.evaluate(`${MARKER} = 'set-before-the-drain'`);
    await page.getByRole('button', { name: 'Drain p1' }).click();
    const dialog = page.getByRole('dialog', { name: 'Drain pool p1?' });
    await dialog.waitFor();
    await saveScreenshot(page, '05-drain-confirm', { fullPage: false });
    await dialog.getByRole('button', { name: 'Drain p1' }).click();
    await dialog.waitFor({ state: 'detached' });
    await expect
      .poll(() => page.locator('.notice').innerText(), { timeout: UI_TIMEOUT_MS })
      .toBe('Drain of p1 accepted.');
    await expect
      .poll(() => poolRow('p1').locator('.badge').getAttribute('data-state'), { timeout: UI_TIMEOUT_MS })
      .toMatch(/^(draining|stopped)$/);
    expect(await poolRow('p1').getByRole('button', { name: 'Drain p1' }).isDisabled()).toBe(true);
    // the same document all along: the marker set before the drain survived
    expect(await page.evaluate(MARKER)).toBe('set-before-the-drain');
    await saveScreenshot(page, '06-drained');
    expect(pageErrors).toEqual([]);
  });
});
