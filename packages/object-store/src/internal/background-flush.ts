/** Bytes written between two background flushes of a file being put. */
const FLUSH_BYTES = 64 * 1024 * 1024;

/**
 * Flushes a file that is still being written, in the background: once `everyBytes` more are
 * written, one `datasync` starts (never two at once), so the disk writes the file while the rest
 * is read, hashed and written instead of all of it at the final fsync. A failed background flush
 * is kept and thrown by `settle`: Linux reports a writeback error once per open file, so the final
 * fsync on the same descriptor would not report it again.
 */
export class BackgroundFlush {
  private flushedAt = 0;
  private flushing: Promise<void> | undefined;
  private failure: unknown;

  constructor(
    private readonly datasync: () => Promise<void>,
    private readonly everyBytes: number = FLUSH_BYTES,
  ) {}

  /** Hears the bytes written so far; starts a flush when `everyBytes` more are written and none runs. */
  written(reached: number): void {
    if (
      this.flushing !== undefined ||
      this.failure !== undefined ||
      reached - this.flushedAt < this.everyBytes
    )
      return;
    this.flushedAt = reached;
    this.flushing = this.datasync().then(
      () => {
        this.flushing = undefined;
      },
      (error: unknown) => {
        this.failure = error;
        this.flushing = undefined;
      },
    );
  }

  /** Waits for the flush in flight; throws the first background flush's failure, if any. */
  async settle(): Promise<void> {
    await this.flushing;
    if (this.failure !== undefined) throw this.failure;
  }
}
