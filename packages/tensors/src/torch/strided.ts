/**
 * Streams a strided view (a transpose, a slice, a stride-0 expansion) in row-major order, in
 * pieces of bounded size, from a storage read through a window: memory stays at one window plus
 * one piece whatever the view's logical size.
 */

/** Reads `length` bytes at `offset` of the storage (relative to the view's first element). */
export type StorageReader = (offset: number, length: number) => Promise<Uint8Array>;

/** A storage window: the bytes of [start, start + bytes.length), reloaded when a read falls outside. */
class Window {
  private start = 0;
  private bytes: Uint8Array = new Uint8Array(0);
  constructor(
    private readonly read: StorageReader,
    private readonly size: number,
    private readonly spanBytes: number,
  ) {}
  /** `length` bytes at `offset`; `length` is at most the window size. */
  view(offset: number, length: number): Uint8Array | Promise<Uint8Array> {
    const at = offset - this.start;
    if (at >= 0 && at + length <= this.bytes.length) return this.bytes.subarray(at, at + length);
    return this.load(offset, length);
  }
  private async load(offset: number, length: number): Promise<Uint8Array> {
    this.start = offset;
    this.bytes = await this.read(offset, Math.min(this.size, this.spanBytes - offset));
    return this.bytes.subarray(0, length);
  }
}

export interface StridedView {
  readonly shape: readonly number[];
  /** In elements; non-negative. */
  readonly stride: readonly number[];
  /** Bytes per element. */
  readonly item: number;
}

/** Bytes from the view's first element to the end of its last one: what the view touches in its storage. */
export function spanBytes(view: StridedView): number {
  let last = 0;
  for (let d = 0; d < view.shape.length; d++) last += (view.shape[d]! - 1) * view.stride[d]!;
  return (last + 1) * view.item;
}

/**
 * Yields the view's elements in row-major order, each piece at most `pieceBytes` (the same buffer
 * each time: use it before asking for the next). Reads go through a window of `windowBytes`; a view
 * whose span fits one window is read once. Innermost runs of stride 1 are copied whole, of stride 0
 * filled by doubling, so an expansion costs about what writing its bytes costs.
 */
export async function* stridedPieces(
  view: StridedView,
  read: StorageReader,
  pieceBytes: number,
  windowBytes: number,
): AsyncGenerator<Uint8Array> {
  const { shape, stride, item } = view;
  const numel = shape.reduce((a, b) => a * b, 1);
  if (numel === 0) return;
  const dims = shape.length;
  const inner = dims === 0 ? 1 : shape[dims - 1]!;
  const innerStride = dims === 0 ? 0 : stride[dims - 1]!;
  const span = spanBytes(view);
  const window = new Window(read, Math.max(Math.min(windowBytes, span), item), span);
  const total = numel * item;
  const out = new Uint8Array(Math.min(Math.max(pieceBytes - (pieceBytes % item), item), total));
  const index = new Array<number>(Math.max(dims - 1, 0)).fill(0);
  let rowStart = 0;
  let column = 0;
  let filled = 0;
  for (let written = 0; written < total; ) {
    const count = Math.min(inner - column, (out.length - filled) / item);
    const source = (rowStart + column * innerStride) * item;
    if (innerStride === 1) {
      // A run may be longer than the window: copy it in window-sized pieces.
      for (let done = 0; done < count * item; ) {
        const n = Math.min(count * item - done, windowBytes - (windowBytes % item) || item);
        const bytes = window.view(source + done, n);
        out.set(bytes instanceof Uint8Array ? bytes : await bytes, filled + done);
        done += n;
      }
    } else if (innerStride === 0) {
      const element = window.view(source, item);
      out.set(element instanceof Uint8Array ? element : await element, filled);
      for (let have = item; have < count * item; have *= 2) {
        out.copyWithin(filled + have, filled, filled + Math.min(have, count * item - have));
      }
    } else {
      for (let k = 0; k < count; k++) {
        const pending = window.view(source + k * innerStride * item, item);
        out.set(pending instanceof Uint8Array ? pending : await pending, filled + k * item);
      }
    }
    filled += count * item;
    written += count * item;
    column += count;
    if (column === inner) {
      column = 0;
      for (let d = dims - 2; d >= 0; d--) {
        index[d]!++;
        rowStart += stride[d]!;
        if (index[d]! < shape[d]!) break;
        rowStart -= stride[d]! * shape[d]!;
        index[d] = 0;
      }
    }
    if (filled === out.length || written === total) {
      yield out.subarray(0, filled);
      filled = 0;
    }
  }
}
