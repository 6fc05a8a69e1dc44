import { spawnSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import { renderSlurmTemplate } from "../src/slurm-template.js";

describe("renderSlurmTemplate", () => {
  const script = renderSlurmTemplate({ graceSeconds: 600, launcher: "launch.sh" });

  it("asks Slurm for SIGUSR1 to the batch shell, traps it into the sentinel, backgrounds the launcher and waits twice", () => {
    const lines = script.split("\n");
    expect(lines[0]).toBe("#!/bin/bash");
    expect(lines).toContain("#SBATCH --signal=B:SIGUSR1@600");
    expect(lines).toContain("#SBATCH --requeue");
    expect(lines).toContain(`trap 'touch "$SLURM_LOG_DIR/SIGUSR1_RECEIVED"' USR1`);
    const launch = lines.indexOf("bash 'launch.sh' &");
    const trap = lines.findIndex((l) => l.startsWith("trap "));
    const mkdir = lines.indexOf('mkdir -p "$SLURM_LOG_DIR"');
    expect(mkdir).toBeGreaterThan(0);
    expect(trap).toBeGreaterThan(mkdir);
    expect(launch).toBeGreaterThan(trap); // the trap is in place before the launcher starts
    const waits = lines.filter((l) => l.startsWith('wait "$launcher_pid"'));
    expect(waits).toHaveLength(2);
    expect(lines.indexOf(waits[0]!)).toBe(launch + 2);
  });

  it("defaults the sentinel directory to one per job window, so a requeued window starts clean", () => {
    // biome-ignore lint/suspicious/noTemplateCurlyInString: bash parameter expansion
    expect(script).toContain("${SLURM_JOB_ID:-local}/${SLURM_RESTART_COUNT:-0}");
    expect(script).toContain("${SLURM_LOG_DIR:-");
  });

  it("is valid bash", () => {
    const check = spawnSync("bash", ["-n"], { input: script });
    expect(check.status, String(check.stderr)).toBe(0);
  });

  it("quotes a given log dir and launcher and adds further #SBATCH options", () => {
    const custom = renderSlurmTemplate({
      graceSeconds: 900,
      launcher: "/shared/it's/run.sh",
      logDir: "/shared/logs dir",
      jobName: "dpo.8b",
      sbatch: ["--nodes=4", "--time=04:00:00"],
    });
    expect(custom).toContain("#SBATCH --signal=B:SIGUSR1@900");
    expect(custom).toContain("#SBATCH --job-name=dpo.8b");
    expect(custom).toContain("#SBATCH --nodes=4\n#SBATCH --time=04:00:00");
    expect(custom).toContain("export SLURM_LOG_DIR='/shared/logs dir'");
    expect(custom).toContain(`bash '/shared/it'\\''s/run.sh' &`);
    expect(spawnSync("bash", ["-n"], { input: custom }).status).toBe(0);
  });

  it("refuses options that would break the script, naming the option", () => {
    const bad = (o: Partial<Parameters<typeof renderSlurmTemplate>[0]>) => () =>
      renderSlurmTemplate({ graceSeconds: 600, launcher: "l.sh", ...o });
    expect(bad({ graceSeconds: 30 })).toThrow(expect.objectContaining({ code: "TEMPLATE_OPTION_INVALID" }));
    expect(bad({ graceSeconds: 70_000 })).toThrow(/--grace-seconds/);
    expect(bad({ graceSeconds: 600.5 })).toThrow(/--grace-seconds/);
    expect(bad({ sbatch: ["nodes=4"] })).toThrow(/--sbatch/);
    expect(bad({ sbatch: ["--x\n rm -rf /"] })).toThrow(/--sbatch/);
    expect(bad({ jobName: "a b" })).toThrow(/--job-name/);
    // The template's own lines are not repeated: a second --requeue or --signal would be ambiguous.
    expect(bad({ sbatch: ["--requeue"] })).toThrow(/"--requeue": the template already requeues/);
    expect(bad({ sbatch: ["--signal=B:USR1@60"] })).toThrow(/from --grace-seconds/);
    expect(bad({ sbatch: ["--job-name=x"] })).toThrow(/from --job-name/);
    expect(bad({ launcher: "" })).toThrow(/--launcher/);
  });
});
