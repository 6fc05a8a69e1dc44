import type { CkptCommandGroup } from "../registry.js";
import { commitCommand } from "./commit.js";
import { fetchCommand } from "./fetch.js";
import { publishCommand } from "./publish.js";
import { pruneVerifiedCommand } from "./prune-verified.js";
import { verifyCommand } from "./verify.js";

/** `ckpt artifact ...`: the digest-verified lifecycle of checkpoint_artifacts/iter_* directories. */
export const artifactGroup: CkptCommandGroup = {
  command: "artifact <command>",
  describe: "Commit, publish, verify, fetch and release checkpoint artifacts",
  subcommands: [commitCommand, publishCommand, verifyCommand, fetchCommand, pruneVerifiedCommand],
};
