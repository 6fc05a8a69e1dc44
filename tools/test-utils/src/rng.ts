import { randomBytes } from "node:crypto";

/** A seeded PRNG: mulberry32. Returns numbers in [0, 1); the same seed gives the same sequence. */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** An integer in [min, max] (both inclusive) drawn from `random`. */
export function randomInt(random: () => number, min: number, max: number): number {
  return min + Math.floor(random() * (max - min + 1));
}

/** `size` bytes drawn from mulberry32(seed): deterministic content that differs per seed. */
export function seededBytes(size: number, seed = 1): Uint8Array {
  const random = mulberry32(seed);
  const out = new Uint8Array(size);
  for (let i = 0; i < size; i++) out[i] = randomInt(random, 0, 255);
  return out;
}

/**
 * The seed of a randomized suite: `$<envName>` when set (to replay a failure), else a fresh one.
 * Put it in the test name so every report carries what is needed to replay the run.
 */
export function seedFrom(envName: string, env: NodeJS.ProcessEnv = process.env): number {
  const given = env[envName];
  if (given !== undefined && given !== "") {
    const seed = Number(given);
    if (!Number.isInteger(seed) || seed < 0 || seed > 0xffffffff) {
      throw new Error(`${envName}=${given}: expected an integer in [0, 4294967295]`);
    }
    return seed;
  }
  return randomBytes(4).readUInt32BE(0);
}
