import { packageTests } from "../../tools/build/vitest.shared";

export default packageTests(import.meta.dirname);
