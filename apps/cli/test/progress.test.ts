import { execFile } from "node:child_process";
import { truncate, writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { testdir } from "@ckpt/test-utils";
import { describe, expect, it } from "vitest";
import { createProgress, progressLine } from "../src/progress.js";
import { captureIo } from "./helpers/capture.js";

const bin = resolve(import.meta.dirname, "..", "dist", "bin.js");
const run = promisify(execFile);
const ESC = String.fromCharCode(27);
/** A terminal control sequence (CSI), as the progress line draws them. */
const ANSI = new RegExp(`${ESC}\\[[0-9;]*[A-Za-z]`, "g");
const BIG = `model-00001-of-00002-${"x".repeat(90)}.safetensors`;

/** A directory with one long-named 256 MiB (sparse) weight file: hashing it takes several redraws. */
async function bigDir(): Promise<string> {
  const dir = await testdir("ckpt-cli-progress-");
  await writeFile(join(dir, BIG), "");
  await truncate(join(dir, BIG), 256 * 1024 * 1024);
  await writeFile(join(dir, "config.json"), "{}");
  return dir;
}

describe("progress line", () => {
  it("says done/total, percent, rate and time left, and fits the width, keeping the end of a long name", () => {
    const state = {
      label: "upload",
      unit: "bytes" as const,
      done: 1024 ** 3,
      total: 4 * 1024 ** 3,
      rate: 100 * 1024 ** 2,
      detail: BIG,
    };
    const line = progressLine(state, 80);
    expect(line.length).toBe(79);
    expect(line).toMatch(
      /^upload \[###-------\] 1\.0 GiB\/4\.0 GiB 25% 100\.0 MiB\/s 0:31 left …x+\.safetensors$/,
    );
    expect(progressLine({ ...state, detail: "config.json" }, 200)).toBe(
      "upload [###-------] 1.0 GiB/4.0 GiB 25% 100.0 MiB/s 0:31 left config.json",
    );
    expect(progressLine({ ...state, rate: undefined }, 20)).toBe("upload [###-------]");
    expect(progressLine({ ...state, done: state.total }, 200)).toMatch(/100% 100\.0 MiB\/s .*safetensors$/);
  });

  it("names the big file still in flight while small ones start and finish around it", () => {
    const c = captureIo({ interactive: true });
    (c.io.stderr as { columns?: number }).columns = 200;
    const progress = createProgress(c.io, "upload", { files: true });
    const frames = () => c.err().split("\r\x1b[2K").filter(Boolean);
    progress.update(0, 1000, "big.safetensors");
    progress.update(10, 1000, "small-1.json");
    progress.fileDone("small-1.json");
    progress.update(1000, 1000, "small-2.json");
    expect(frames()[0]).toMatch(/ big\.safetensors$/);
    expect(frames().at(-1)).toMatch(/ big\.safetensors \(\+1\)$/);
    progress.fileDone("big.safetensors");
    progress.update(1000, 1000, "small-2.json");
    expect(frames().at(-1)).toMatch(/ small-2\.json$/);
    progress.finish();
    expect(c.err().endsWith("\r\x1b[2K")).toBe(true);
    expect(c.err()).not.toContain("\n");
  });
});

describe("progress on a real terminal and through a pipe", () => {
  it("on an 80-column pseudo-terminal: one line redrawn in place, never longer than 80 columns", async () => {
    const dir = await bigDir();
    // script(1) runs the command on a pseudo-terminal and copies what it draws to stdout.
    const { stdout } = await run(
      "script",
      ["-qfec", `stty cols 80 rows 24; exec ${process.execPath} ${bin} fingerprint ${dir}`, "/dev/null"],
      { maxBuffer: 16 * 1024 * 1024 },
    );
    const lines = stdout.split("\n");
    for (const line of lines) {
      for (const segment of line.split("\r"))
        expect(segment.replace(ANSI, "").length).toBeLessThanOrEqual(80);
    }
    const withProgress = lines.filter((line) => line.includes("hash "));
    expect(withProgress).toHaveLength(1);
    const frames = withProgress[0]!
      .split("\r")
      .map((s) => s.replace(ANSI, ""))
      .filter((s) => s.startsWith("hash "));
    expect(frames.length).toBeGreaterThanOrEqual(2);
    expect(frames.at(-1)).toMatch(/^hash \[#{10}\] 256\.0 MiB\/256\.0 MiB 100% /);
    // While the big file is hashed, the line names it (its end: the name is longer than the line).
    expect(frames.some((frame) => / …x+\.safetensors( \(\+1\))?$/.test(frame))).toBe(true);
    // The line is cleared before the result is printed on it.
    expect(stdout.replace(ANSI, "")).toMatch(/\r[0-9a-f]{64}\r?\n/);
  });

  it("piped: no progress bytes on stderr, the result alone on stdout", async () => {
    const dir = await bigDir();
    const { stdout, stderr } = await run(process.execPath, [bin, "fingerprint", dir]);
    expect(stdout).toMatch(/^[0-9a-f]{64}\n$/);
    expect(stderr).not.toContain("\r");
    expect(stderr).not.toContain(ESC);
    expect(stderr).not.toContain("hash ");
    expect(stderr).toBe("ckpt.fingerprint.v1, full: 2 files, 256.0 MiB\n");
  });
});
