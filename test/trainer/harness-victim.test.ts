// The crash harness's two additions for trainer suites: any executable (not only node), and a
// victim other than the command's own process (the sidecar a trainer spawned).
import { describe, expect, it } from "vitest";
import { childPids, runNode } from "../helpers/crash.js";

/** A parent that spawns one child and reports how the child ended. */
const PARENT = `
const { spawn } = require("node:child_process");
const child = spawn(process.execPath, ["-e", "setTimeout(() => {}, 60000)"], { stdio: "ignore" });
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
        killAtMs: 800,
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
    expect(run.stdout.trim()).toBe("child SIGKILL");
  });

  it("delivers no kill when the callback finds no victim yet", async () => {
    const run = await runNode(
      { args: ["-e", "setTimeout(() => {}, 300)"] },
      { killAtMs: 50, victim: () => undefined },
    );
    expect(run.killed).toBe(false);
    expect(run.code).toBe(0);
  });
});
