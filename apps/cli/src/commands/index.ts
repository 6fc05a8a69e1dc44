import { artifactGroup } from "./artifact/index.js";
import { demoCommand } from "./demo.js";
import { doctorGroup } from "./doctor.js";
import { drillCommand } from "./drill.js";
import { estimateCommand } from "./estimate.js";
import { evidenceCommand } from "./evidence.js";
import { fingerprintCommand } from "./fingerprint.js";
import { gcCommand } from "./gc.js";
import { inspectCommand } from "./inspect.js";
import { materializeHfCommand } from "./materialize-hf.js";
import { mcpCommand } from "./mcp.js";
import { mergeCommand } from "./merge.js";
import type { CommandEntry } from "./registry.js";
import { resumableCommand } from "./resumable.js";
import { resumedCommand } from "./resumed.js";
import { runGroup } from "./run-status.js";
import { storeGroup } from "./store/index.js";
import { uiCommand } from "./ui.js";
import { verifyCommand } from "./verify.js";

/** Every top-level command, in the order `ckpt --help` lists them. */
export const commands: readonly CommandEntry[] = [
  artifactGroup,
  storeGroup,
  inspectCommand,
  verifyCommand,
  fingerprintCommand,
  mergeCommand,
  materializeHfCommand,
  doctorGroup,
  estimateCommand,
  demoCommand,
  evidenceCommand,
  runGroup,
  resumableCommand,
  gcCommand,
  resumedCommand,
  drillCommand,
  mcpCommand,
  uiCommand,
];
