// Public surface of @ckpt/progress.
export { drain, type Executor, type LongOperation, mapEvents, withEvents } from "./operation.js";
