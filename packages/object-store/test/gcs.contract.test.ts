import { createGcsStore } from "../src/gcs/store.js";
import { describeStoreContract } from "./contract.js";
import { startFakeGcsServer } from "./helpers/fake-gcs-server.js";

// The shared contract against the loopback fake of the GCS JSON API. It proves the backend's
// translation to and from the JSON API; a real bucket is qualified by `ckpt doctor object-store gs://…`.
describeStoreContract("gcs (fake JSON API)", async () => {
  const fake = await startFakeGcsServer();
  return {
    store: createGcsStore({
      bucket: "ckpt-bucket",
      prefix: "runs/r1",
      apiEndpoint: fake.url,
      projectId: "test",
      retry: { retries: 2, sleep: async () => {} },
    }),
    cleanup: () => fake.close(),
  };
});
