import { chromium, type Browser } from 'playwright-core';
import { ensureChromium } from './chromium.js';

/**
 * Headless Debian chromium driven by playwright-core. `--no-sandbox` because CI runs as root
 * (chromium refuses its sandbox there); `--disable-dev-shm-usage` because containers often have a
 * tiny /dev/shm, which crashes renderers under load.
 */
export async function launchChromium(): Promise<Browser> {
  const executablePath = await ensureChromium();
  return chromium.launch({
    executablePath,
    headless: true,
    args: ['--no-sandbox', '--disable-dev-shm-usage'],
    timeout: 120_000,
  });
}
