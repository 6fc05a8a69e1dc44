/**
 * The building package's `version` from its package.json, replaced at build time by tsup's
 * `define` (tools/build/tsup.base.ts) and in tests by vitest's (tools/build/vitest.shared.ts).
 */
declare const __CKPT_PACKAGE_VERSION__: string;
