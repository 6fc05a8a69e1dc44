/**
 * Turns callbacks into an async iterable: work that reports through `push` (from inside a writer's
 * callbacks, where an async generator cannot yield) is read by a `for await` loop.
 */
export class EventChannel<T> {
  private readonly queue: T[] = [];
  private wake: (() => void) | undefined;
  private ended = false;
  private failure: { error: unknown } | undefined;

  push(value: T): void {
    this.queue.push(value);
    this.signal();
  }

  end(): void {
    this.ended = true;
    this.signal();
  }

  fail(error: unknown): void {
    this.failure = { error };
    this.end();
  }

  private signal(): void {
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<T> {
    for (;;) {
      while (this.queue.length > 0) yield this.queue.shift()!;
      if (this.ended) {
        if (this.failure) throw this.failure.error;
        return;
      }
      await new Promise<void>((resolve) => {
        this.wake = resolve;
      });
    }
  }
}
