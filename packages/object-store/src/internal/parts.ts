import { abortError } from "./body.js";

/** Default memory for multipart part buffers, shared by all uploads of one store. */
export const DEFAULT_PART_BUFFER_BYTES = 64 * 1024 * 1024;

/**
 * One part's buffer, lent by a {@link PartBuffers}. `release` hands it back for reuse once its
 * upload has succeeded; `discard` gives up its share of the budget without reusing the memory
 * (after a failed or aborted request, whose socket may still read from it).
 */
export interface PartLease {
  readonly bytes: Buffer;
  release(): void;
  discard(): void;
}

interface Waiter {
  readonly size: number;
  readonly grant: (lease: PartLease) => void;
}

/**
 * The memory of multipart upload parts, shared by every upload of one store: at most `budget`
 * bytes of part buffers exist at once, lent in request order and reused, so any number of
 * concurrent uploads of large files stays within one bound. A part larger than the whole budget
 * is lent when nothing else is out, so it cannot wait forever.
 */
export class PartBuffers {
  /** Bytes lent out. */
  private lent = 0;
  /** Returned buffers kept for reuse; they count against the budget too. */
  private readonly spare: Buffer[] = [];
  private readonly waiting: Waiter[] = [];

  constructor(readonly budget: number) {}

  /** Bytes held now (lent and spare): never above the budget, unless one oversized part is out. */
  get held(): number {
    return this.lent + this.spare.reduce((sum, b) => sum + b.byteLength, 0);
  }

  /** A buffer of exactly `size` bytes (contents undefined), once the budget allows it. */
  acquire(size: number, signal?: AbortSignal, subject = "upload"): Promise<PartLease> {
    if (signal?.aborted) return Promise.reject(abortError(subject, signal));
    if (this.waiting.length === 0 && this.fits(size)) return Promise.resolve(this.lend(size));
    return new Promise<PartLease>((resolve, reject) => {
      const onAbort = () => {
        const at = this.waiting.indexOf(waiter);
        if (at >= 0) this.waiting.splice(at, 1);
        reject(abortError(subject, signal));
        this.wake();
      };
      const waiter: Waiter = {
        size,
        grant: (lease) => {
          signal?.removeEventListener("abort", onAbort);
          resolve(lease);
        },
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      this.waiting.push(waiter);
    });
  }

  private fits(size: number): boolean {
    return this.lent === 0 || this.lent + size <= this.budget;
  }

  private lend(size: number): PartLease {
    let buffer: Buffer | undefined;
    const reusable = this.spare.findIndex((b) => b.byteLength >= size);
    if (reusable >= 0) buffer = this.spare.splice(reusable, 1)[0]!;
    else {
      // Make room: spare buffers too small for this part are dropped before allocating.
      while (this.spare.length > 0 && this.held + size > this.budget) this.spare.pop();
      buffer = Buffer.allocUnsafeSlow(size);
    }
    const whole = buffer;
    this.lent += whole.byteLength;
    let settled = false;
    const settle = (keep: boolean) => {
      if (settled) return;
      settled = true;
      this.lent -= whole.byteLength;
      if (keep && this.held + whole.byteLength <= this.budget) this.spare.push(whole);
      this.wake();
    };
    return {
      bytes: whole.subarray(0, size),
      release: () => settle(true),
      discard: () => settle(false),
    };
  }

  private wake(): void {
    while (this.waiting.length > 0 && this.fits(this.waiting[0]!.size)) {
      const next = this.waiting.shift()!;
      next.grant(this.lend(next.size));
    }
  }
}
