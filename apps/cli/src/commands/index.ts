import { doctorCommand } from "./doctor.js";
import { inspectCommand } from "./inspect.js";
import type { AnyCommand } from "./registry.js";

/** Every top-level command, in the order `ckpt --help` lists them. */
export const commands: readonly AnyCommand[] = [inspectCommand, doctorCommand];
