import { createMemoryStore } from "../src/memory/store.js";
import { describeStoreContract } from "./contract.js";

describeStoreContract("memory", async () => ({ store: createMemoryStore(), cleanup: async () => {} }));

describeStoreContract("memory, prefixed, sharing its name with neighbours", async () => {
  const name = `contract-${Math.random().toString(36).slice(2)}`;
  // Neighbours under the same name: a sibling prefix and one sharing the prefix's leading characters.
  await createMemoryStore({ name, prefix: "runs/other" }).put("many/k-00", new Uint8Array(1));
  await createMemoryStore({ name, prefix: "runs/r1x" }).put("a0", new Uint8Array(1));
  return { store: createMemoryStore({ name, prefix: "runs/r1" }), cleanup: async () => {} };
});
