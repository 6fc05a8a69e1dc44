// @module-tag crash
// The crash harness's additions for trainer suites: any executable (not only node), a victim other
// than the command's own process (the sidecar a trainer spawned), and kill instants counted from a
// marker the program prints once its start-up is over.
import { describe, expect, it } from "vitest";
import { childPids, runNode } from "../helpers/crash.js";

/** A parent that spawns one child and reports how the child ended. */
const PARENT = `
const { spawn } = require("node:child_process");
const child = spawn(process.execPath, ["-e", "setTimeout(() => {}, 60000)"], { stdio: "ignore" });
child.on("spawn", () => console.log("spawned"));
child.on("exit", (code, signal) => { console.log("child " + signal); process.exit(3); });
`;

describe("crash harness: executable and victim", () => {
  it("runs another executable", async () => {
    const run = await runNode({ executable: "/bin/sh", args: ["-c", "echo from-sh; exit 4"] });
    expect(run.stdout.trim()).toBe("from-sh");
    expect(run.code).toBe(4);
    expect(run.killed).toBe(false);
  });

  it("kills the victim the callback picks and counts it as a kill, while the parent lives on", async () => {
    let parentPid = 0;
    let picked: number | undefined;
    const run = await runNode(
      { args: ["-e", PARENT] },
      {
        killAtMs: 50,
        armOn: /spawned/, // however slow the machine, the child exists by then
        victim: (pid) => {
          parentPid = pid;
          picked = childPids(pid)[0];
          return picked;
        },
      },
    );
    expect(picked).toBeGreaterThan(0);
    expect(picked).not.toBe(parentPid);
    expect(run.killed).toBe(true);
    expect(run.signal).toBeNull(); // the parent was not killed: it exited on its own
    expect(run.code).toBe(3);
    expect(run.stdout.trim().split("\n")).toEqual(["spawned", "child SIGKILL"]);
  });

  it("delivers no kill when the callback finds no victim yet", async () => {
    const run = await runNode(
      { args: ["-e", "setTimeout(() => {}, 300)"] },
      { killAtMs: 50, victim: () => undefined },
    );
    expect(run.killed).toBe(false);
    expect(run.code).toBe(0);
  });

  it("counts the kill instant from the first output matching the marker", async () => {
    const script = 'setTimeout(() => console.log("ready"), 600); setTimeout(() => {}, 5000);';
    const run = await runNode({ args: ["-e", script] }, { killAtMs: 100, armOn: /ready/ });
    expect(run.killed).toBe(true);
    expect(run.armedAtMs).toBeGreaterThanOrEqual(550);
    expect(run.ms).toBeGreaterThanOrEqual(run.armedAtMs! + 90);
    const never = await runNode(
      { args: ["-e", "setTimeout(() => {}, 300)"] },
      { killAtMs: 10, armOn: /ready/ },
    );
    expect([never.killed, never.armedAtMs, never.code]).toEqual([false, undefined, 0]);
  });
});
