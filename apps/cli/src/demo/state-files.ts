// The demo trainer's side of a save: it writes the component files at the targets the checkpoint
// manager hands out (the manager owns layout and commit) and reads them back on resume.
// model.pt holds `{"net": state_dict}` in bf16 with Hugging Face names, as post-training tools
// expect; optim.pt holds the fp32 master weights and both AdamW moments, so resume is exact.
import type { LogicalComponent } from "@ckpt/manifest";
import type { TorchTree } from "@ckpt/tensors";
import { DemoError } from "./errors.js";
import { PARAM_SPECS, type Params, type TrainState } from "./model.js";

export interface ComponentPaths {
  readonly model?: string;
  readonly optim?: string;
  readonly trainer?: string;
}

export interface TrainerMeta {
  readonly taskSeed: number;
  readonly dataSeed: number;
}

const dict = (dtype: "BF16" | "F32"): TorchTree =>
  Object.fromEntries(PARAM_SPECS.map((s) => [s.name, { dtype, shape: [...s.shape] }]));

function bf16(
  values: Float32Array,
  f32ToBf16Bytes: (src: Float32Array, dst: Uint8Array) => void,
): Uint8Array {
  const out = new Uint8Array(values.length * 2);
  f32ToBf16Bytes(values, out);
  return out;
}

const f32Bytes = (values: Float32Array) =>
  new Uint8Array(values.buffer, values.byteOffset, values.byteLength);

/** Writes the model as a bf16 `{"net": state_dict}` torch.save file. */
async function writeModelFile(path: string, params: Params): Promise<number> {
  const { f32ToBf16Bytes, writeTorchFile } = await import("@ckpt/tensors");
  const written = await writeTorchFile(path, {
    tree: { net: dict("BF16") },
    provideTensor: (name) => bf16(params.get(name.slice("net.".length))!, f32ToBf16Bytes),
  });
  return written.bytes;
}

/**
 * Writes every component the targets name. `afterFirst` runs once the first file is on disk and
 * before the next one starts: the demo's kill fault stops the worker there, inside the save.
 */
export async function writeComponents(
  targets: ComponentPaths,
  state: TrainState,
  meta: TrainerMeta,
  afterFirst?: () => Promise<void>,
): Promise<number> {
  const { writeTorchFile } = await import("@ckpt/tensors");
  let bytes = 0;
  let first = true;
  const landed = async () => {
    if (first && afterFirst) await afterFirst();
    first = false;
  };
  if (targets.model) {
    bytes += await writeModelFile(targets.model, state.params);
    await landed();
  }
  if (targets.optim) {
    const tensors: Record<string, Float32Array> = {};
    for (const [name, w] of state.params) tensors[`master.${name}`] = w;
    for (const [name, m] of state.adam.expAvg) tensors[`exp_avg.${name}`] = m;
    for (const [name, v] of state.adam.expAvgSq) tensors[`exp_avg_sq.${name}`] = v;
    const written = await writeTorchFile(targets.optim, {
      tree: { master: dict("F32"), exp_avg: dict("F32"), exp_avg_sq: dict("F32"), step: state.step },
      provideTensor: (name) => f32Bytes(tensors[name]!),
    });
    bytes += written.bytes;
    await landed();
  }
  if (targets.trainer) {
    const written = await writeTorchFile(targets.trainer, {
      tree: {
        iteration: state.step,
        loss: Number.isFinite(state.loss) ? state.loss : null,
        task_seed: meta.taskSeed,
        data_seed: meta.dataSeed,
      },
      provideTensor: () => new Uint8Array(0),
    });
    bytes += written.bytes;
    await landed();
  }
  return bytes;
}

/** Reads the tensors of a torch.save file by their dotted names. */
async function readTensors(path: string): Promise<Map<string, Float32Array>> {
  const [{ openFileByteSource }, { openTorchFile }] = await Promise.all([
    import("@ckpt/manifest"),
    import("@ckpt/tensors"),
  ]);
  const source = await openFileByteSource(path);
  let file: Awaited<ReturnType<typeof openTorchFile>>;
  try {
    file = await openTorchFile(source);
  } catch (error) {
    await source.close();
    throw error;
  }
  try {
    const out = new Map<string, Float32Array>();
    for (const entry of file.tensors) {
      if (entry.dtype !== "F32") continue;
      const bytes = await file.readTensor(entry);
      out.set(
        entry.name,
        new Float32Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength)),
      );
    }
    return out;
  } finally {
    await file.close();
  }
}

/** Restores weights and optimizer moments from a resume source's optim.pt; the iteration comes from the decision. */
export async function readTrainState(optimPath: string, iteration: number): Promise<TrainState> {
  const tensors = await readTensors(optimPath);
  const pick = (group: string): Params =>
    new Map(
      PARAM_SPECS.map((s) => {
        const t = tensors.get(`${group}.${s.name}`);
        if (t === undefined) {
          throw new DemoError(
            "DEMO_STATE_INCOMPLETE",
            `${optimPath} holds no ${group}.${s.name}; it was not written by the demo trainer.`,
            "failed",
          );
        }
        return [s.name, t];
      }),
    );
  return {
    params: pick("master"),
    adam: { expAvg: pick("exp_avg"), expAvgSq: pick("exp_avg_sq") },
    step: iteration,
    loss: Number.NaN,
  };
}

/** The physical files a plan's logical components map to, as this trainer writes them. */
export function pathsFor(
  targets: Partial<Record<string, string>>,
  components: readonly LogicalComponent[],
): ComponentPaths {
  return {
    ...(components.includes("model") && targets.model ? { model: targets.model } : {}),
    ...(components.includes("optimizer") && targets.optim ? { optim: targets.optim } : {}),
    ...(components.includes("training_state") && targets.trainer ? { trainer: targets.trainer } : {}),
  };
}
