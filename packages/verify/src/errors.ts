import { CkptSubjectError } from "@ckpt/errors";

/** Every code @ckpt/verify throws (documented in docs/troubleshooting.md); findings are problems, not errors. */
export type VerifyErrorCode = "VERIFY_PATH_MISSING" | "VERIFY_UNKNOWN_KIND";

/** The one error class of @ckpt/verify: the path it could not judge is the `subject`. */
export class VerifyError extends CkptSubjectError<VerifyErrorCode> {
  override readonly name = "VerifyError";
}
