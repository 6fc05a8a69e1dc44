import { makeTempDir } from "@ckpt/test-utils";
import { createFileStore } from "../src/file/store.js";
import { describeStoreContract } from "./contract.js";

describeStoreContract("file", async () => {
  const { dir, cleanup } = await makeTempDir("ckpt-file-store-");
  return { store: createFileStore({ root: `${dir}/archive` }), cleanup };
});
