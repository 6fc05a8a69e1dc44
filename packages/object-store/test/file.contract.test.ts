import { testdir } from "@ckpt/test-utils";
import { createFileStore } from "../src/file/store.js";
import { describeStoreContract } from "./contract.js";

describeStoreContract("file", async () => {
  const dir = await testdir("ckpt-file-store-");
  return { store: createFileStore({ root: `${dir}/archive` }), cleanup: async () => {} };
});
