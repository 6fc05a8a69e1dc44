// The ckpt-trainer command line: its sub-commands, exit codes and help.
import { existsSync } from "node:fs";
import { join } from "node:path";
import { PassThrough, Readable } from "node:stream";
import { describe, expect, it } from "vitest";
import { runTrainerBin } from "../src/cli.js";

async function run(argv: string[], input = ""): Promise<{ code: number; out: string; err: string }> {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  let out = "";
  let err = "";
  stdout.on("data", (d) => (out += d));
  stderr.on("data", (d) => (err += d));
  const code = await runTrainerBin(argv, { stdin: Readable.from([input]), stdout, stderr });
  return { code, out, err };
}

describe("ckpt-trainer", () => {
  it("lists its commands", async () => {
    const { code, out } = await run(["--help"]);
    expect(code).toBe(0);
    for (const command of ["serve", "slurm-template", "python-path"])
      expect(out).toContain(`ckpt-trainer ${command}`);
  });

  it("slurm-template prints the wiring, and refuses an option that would break it (exit 2)", async () => {
    const ok = await run([
      "slurm-template",
      "--grace-seconds",
      "900",
      "--launcher",
      "run.sh",
      "--sbatch=--nodes=2",
    ]);
    expect(ok.code).toBe(0);
    expect(ok.out).toContain("#SBATCH --signal=B:SIGUSR1@900\n");
    expect(ok.out).toContain("#SBATCH --nodes=2\n");
    expect(ok.out).toContain("bash 'run.sh' &\n");
    const bad = await run(["slurm-template", "--grace-seconds", "5"]);
    expect(bad.code).toBe(2);
    expect(bad.err).toContain("--grace-seconds 5");
    expect(bad.out).toBe("");
  });

  it("python-path prints the directory of the one-file client", async () => {
    const { code, out } = await run(["python-path"]);
    expect(code).toBe(0);
    expect(existsSync(join(out.trim(), "ckpt_trainer_client.py"))).toBe(true);
  });

  it("serve answers on stdout and exits 1 when the trainer leaves without finalize", async () => {
    const { code, out, err } = await run(["serve"], '{"id":1,"op":"hello","args":{"protocol":[1]}}\n');
    expect(code).toBe(1);
    expect(JSON.parse(out)).toMatchObject({
      id: 1,
      ok: true,
      result: { protocol: 1, server: "ckpt-trainer" },
    });
    expect(err).toContain("without finalize");
  });

  it("an unknown command is bad usage (exit 2)", async () => {
    const { code, err } = await run(["serv"]);
    expect(code).toBe(2);
    expect(err).toContain("ckpt-trainer:");
  });
});
