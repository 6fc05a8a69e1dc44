import { artifactGroup } from "./artifact/index.js";
import { demoCommand } from "./demo.js";
import { doctorCommand } from "./doctor.js";
import { evidenceCommand } from "./evidence.js";
import { inspectCommand } from "./inspect.js";
import { mergeCommand } from "./merge.js";
import type { CommandEntry } from "./registry.js";
import { storeGroup } from "./store/index.js";

/** Every top-level command, in the order `ckpt --help` lists them. */
export const commands: readonly CommandEntry[] = [
  artifactGroup,
  storeGroup,
  inspectCommand,
  mergeCommand,
  doctorCommand,
  demoCommand,
  evidenceCommand,
];
