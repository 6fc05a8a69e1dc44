import { PassThrough } from "node:stream";
import type { CliIo } from "../../src/io.js";

/** A CliIo whose stdout and stderr are collected as text, for asserting on what a command printed. */
export function captureIo(
  options: { interactive?: boolean; color?: boolean; env?: NodeJS.ProcessEnv } = {},
): {
  io: CliIo;
  out: () => string;
  err: () => string;
} {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  let out = "";
  let err = "";
  stdout.on("data", (c) => (out += c));
  stderr.on("data", (c) => (err += c));
  const interactive = options.interactive ?? false;
  return {
    io: { stdout, stderr, interactive, color: options.color ?? false, env: options.env ?? {} },
    out: () => out,
    err: () => err,
  };
}
