import { kindOf, ManagerError, messageOf } from "./errors.js";

/**
 * One in-flight write per role: a job scheduled for a role starts after that role's previous job
 * (so commits, pointers, uploads and retention keep their order under save_async), and `join`
 * waits for the roles' jobs. A failed background job is reported once, by the next join.
 */
export class WriteSlots {
  private readonly tails = new Map<string, Promise<void>>();
  private readonly failures: Array<{ role: string; error: unknown }> = [];

  /**
   * Runs `job` after every named role's current job; returns its result. `background`: nobody
   * awaits the result, so a failure is kept for the next `join` (a foreground caller gets it thrown).
   */
  schedule<T>(roles: readonly string[], job: () => Promise<T>, background: boolean): Promise<T> {
    const before = Promise.all(roles.map((r) => this.tails.get(r) ?? Promise.resolve()));
    const result = before.then(job);
    const settled = result.then(
      () => undefined,
      (error: unknown) => {
        if (background) this.failures.push({ role: roles.join("+"), error });
      },
    );
    for (const role of roles) this.tails.set(role, settled);
    return result;
  }

  /** Waits for the roles' in-flight jobs (all roles when none are named), then throws a background failure not yet reported. */
  async join(roles?: readonly string[]): Promise<void> {
    const names = roles ?? [...this.tails.keys()];
    await Promise.all(names.map((r) => this.tails.get(r) ?? Promise.resolve()));
    const failure = this.failures.shift();
    if (failure === undefined) return;
    this.failures.length = 0;
    const { error } = failure;
    throw new ManagerError(
      "MANAGER_ASYNC_SAVE_FAILED",
      `the background commit of role ${failure.role} failed: ${messageOf(error)} The last complete checkpoint stays the resume source.`,
      { kind: kindOf(error) === "transient" ? "transient" : "failed", cause: error },
    );
  }
}
