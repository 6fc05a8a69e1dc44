import type { DType } from "../dtypes.js";

/** One storage as the pickle references it: the member `<prefix>/data/<key>` read as `dtype`. */
export class TorchStorageRef {
  constructor(
    readonly key: string,
    readonly dtype: DType,
    /** Elements the pickle says the storage holds (the whole storage, not one tensor). */
    readonly numel: number,
  ) {}
}

/** A tensor in the unpickled tree: where its elements live, never the elements themselves. */
export class TorchTensor {
  constructor(
    readonly storage: TorchStorageRef,
    /** In elements. */
    readonly storageOffset: number,
    readonly shape: readonly number[],
    /** In elements. */
    readonly stride: readonly number[],
    readonly requiresGrad: boolean,
    readonly isParameter: boolean,
  ) {}
  get dtype(): DType {
    return this.storage.dtype;
  }
  get numel(): number {
    return this.shape.reduce((a, b) => a * b, 1);
  }
  /** True when the elements are one dense run in row-major order. */
  get contiguous(): boolean {
    let expected = 1;
    for (let d = this.shape.length - 1; d >= 0; d--) {
      const size = this.shape[d]!;
      if (size !== 1 && this.stride[d] !== expected) return this.numel === 0;
      expected *= size;
    }
    return true;
  }
}
