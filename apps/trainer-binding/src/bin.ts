#!/usr/bin/env node
import "./uv-threads.js";
import { runTrainerBin } from "./cli.js";

runTrainerBin(process.argv.slice(2), {
  stdin: process.stdin,
  stdout: process.stdout,
  stderr: process.stderr,
  exit: (code) => process.exit(code),
}).then((code) => {
  // Exit explicitly once stdout is flushed: the trainer waits for this process to end, and nothing
  // the session started may keep it alive after its last response.
  process.stdout.write("", () => process.exit(code));
});
