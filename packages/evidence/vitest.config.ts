import { packageTests } from "../../tools/build/vitest.shared.ts";

export default packageTests(import.meta.dirname);
