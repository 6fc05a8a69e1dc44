/** Problems the server itself reports inside a tool's answer (the libraries' codes pass through as they are). */
type McpProblemCode = "MCP_PARTIAL" | "MCP_DIR_UNREADABLE";

export interface McpProblem {
  readonly code: McpProblemCode;
  readonly subject: string;
  readonly message: string;
}

/** The time one request may take; every tool answers by then, with what it has. */
export class RequestBudget {
  readonly #deadline: number;
  readonly #controller = new AbortController();
  readonly #timer: NodeJS.Timeout;

  constructor(readonly budgetMs: number) {
    this.#deadline = performance.now() + budgetMs;
    this.#timer = setTimeout(() => this.#controller.abort(), budgetMs);
    this.#timer.unref();
  }

  get expired(): boolean {
    return performance.now() >= this.#deadline;
  }

  /** Aborted when the budget runs out: cancels library work that takes a signal. */
  get signal(): AbortSignal {
    return this.#controller.signal;
  }

  /**
   * `work`'s value, or `undefined` when the budget ran out first; work given `signal` stops then
   * (the evidence collection and verify take it), the rest finishes in the background (it only
   * reads) and its answer is dropped.
   */
  async race<T>(work: Promise<T>): Promise<T | undefined> {
    const expired = new Promise<undefined>((resolve) => {
      if (this.#controller.signal.aborted) resolve(undefined);
      this.#controller.signal.addEventListener("abort", () => resolve(undefined), { once: true });
    });
    work.catch(() => {});
    return Promise.race([work, expired]);
  }

  dispose(): void {
    clearTimeout(this.#timer);
  }

  partial(subject: string, what: string): McpProblem {
    return {
      code: "MCP_PARTIAL",
      subject,
      message: `${what} did not finish within the request budget of ${this.budgetMs} ms; the answer is partial. Ask about a narrower path, or start the server with a larger --budget-ms.`,
    };
  }
}
