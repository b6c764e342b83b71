#!/usr/bin/env node
// A file that exists at install time, so pnpm can link the bin before `pnpm build` writes dist/.
import '../dist/main.js';
