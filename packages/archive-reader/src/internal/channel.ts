/**
 * A queue that concurrent producers push into and one async generator drains, so parallel work
 * can report through a single ordered event stream. `close()` ends the stream; `fail(error)`
 * ends it with that error once the queued items are drained.
 */
export class EventChannel<T> {
  private readonly items: T[] = [];
  private wake: (() => void) | undefined;
  private ended: { error?: unknown } | undefined;

  push(item: T): void {
    this.items.push(item);
    this.notify();
  }

  close(): void {
    this.ended ??= {};
    this.notify();
  }

  fail(error: unknown): void {
    this.ended ??= { error };
    this.notify();
  }

  async *drain(): AsyncGenerator<T> {
    for (;;) {
      while (this.items.length > 0) yield this.items.shift()!;
      if (this.ended !== undefined) {
        if ("error" in this.ended) throw this.ended.error;
        return;
      }
      await new Promise<void>((resolve) => {
        this.wake = resolve;
      });
    }
  }

  private notify(): void {
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }
}
