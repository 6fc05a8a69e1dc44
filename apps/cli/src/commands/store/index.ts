import type { CkptCommandGroup } from "../registry.js";
import { copyCommand } from "./copy.js";
import { downloadCommand } from "./download.js";

/** `ckpt store ...`: move whole prefixes between stores and local disk. */
export const storeGroup: CkptCommandGroup = {
  command: "store <command>",
  describe: "Download or copy whole prefixes (idempotent, same-size skip)",
  subcommands: [downloadCommand, copyCommand],
};
