import { createHash } from "node:crypto";
import { quote, refusal } from "../errors.js";
import type { TiedAlias } from "../plan/mapping.js";
import type { OpenedSource } from "./open.js";

async function tensorDigest(opened: OpenedSource, name: string): Promise<string> {
  const hash = createHash("sha256");
  for await (const piece of opened.torch.tensorPieces(opened.entry(name))) hash.update(piece);
  return hash.digest("hex");
}

/**
 * Refuses a tied alias the plan accepted on the config's word (`proof: "bytes"`) whose bytes differ
 * from the key it would be dropped for; reads both tensors in bounded memory.
 */
export async function assertTiedCopies(opened: OpenedSource, aliases: readonly TiedAlias[]): Promise<void> {
  for (const alias of aliases) {
    if (alias.proof !== "bytes") continue;
    if ((await tensorDigest(opened, alias.name)) === (await tensorDigest(opened, alias.sameAs))) continue;
    throw refusal(
      "MATERIALIZE_KEY_EXTRA",
      `checkpoint key ${quote(alias.name)} differs from ${quote(alias.sameAs)}, though the base's config.json ties the word embeddings and its index does not list ${quote(alias.name)}`,
      "the build would have dropped a trained output embedding that is not the input one",
      `Materialize against a base whose index lists ${quote(alias.name)} (untied embeddings), or tie the weights in training.`,
      { key: alias.name, kind: "input" },
    );
  }
}
