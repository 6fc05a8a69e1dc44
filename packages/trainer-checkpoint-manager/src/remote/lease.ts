import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import type { ObjectStore } from "@ckpt/object-store";
import { ManagerError } from "../errors.js";
import { storeFailure, readSmallObject } from "../internal/store.js";
import {
  LEASE_PREFIX,
  LEASE_SCHEMA,
  type LeaseRecord,
  leaseKey,
  leaseRecord,
  parseLeaseKey,
} from "../records.js";

/** Who holds a lease: this process's identity, with a random token that only it knows. */
export type LeaseHolder = LeaseRecord["holder"];

/** What to do about the current lease of a root. */
export type LeaseDecision =
  | { readonly action: "create"; readonly epoch: number }
  | { readonly action: "refuse"; readonly current: LeaseRecord };

/**
 * Decides whether `token` may write a root whose highest lease is `current` (undefined: none):
 * a live lease of another holder refuses; an expired or released one (or none) is taken over by
 * creating the next epoch. A holder finding its own live lease creates the next epoch too (a
 * restarted process has a new token anyway). Pure.
 */
export function decideLease(current: LeaseRecord | undefined, now: Date, token: string): LeaseDecision {
  if (current === undefined) return { action: "create", epoch: 1 };
  const live = !current.released && Date.parse(current.expires_at) > now.getTime();
  if (live && current.holder.token !== token) return { action: "refuse", current };
  return { action: "create", epoch: current.epoch + 1 };
}

function describeHolder(h: LeaseHolder): string {
  return `host ${h.host} pid ${h.pid}${h.run_ts === "" ? "" : ` (run ${h.run_ts})`}`;
}

/**
 * The direct-primary writer lease (beyond the seed, which trusts users not to point two jobs at
 * one prefix): the writer conditionally creates `.posttrain-lease/epoch-<n>.json` with an expiry,
 * renews it while alive, and checks before each commit that no later epoch exists. A second
 * writer finding a live lease is refused by name; an expired one is taken over by the next epoch.
 */
export class WriterLease {
  private lost = false;
  private timer: NodeJS.Timeout | undefined;

  private constructor(
    private readonly store: ObjectStore,
    private record: LeaseRecord,
    private readonly ttlMs: number,
    private readonly clock: () => Date,
    private readonly onEvent: (action: "acquired" | "renewed" | "released" | "lost", key: string) => void,
  ) {}

  get key(): string {
    return leaseKey(this.record.epoch);
  }

  static newHolder(runTs: string): LeaseHolder {
    return {
      host: hostname().slice(0, 255),
      pid: process.pid,
      run_ts: runTs,
      token: randomBytes(16).toString("hex"),
    };
  }

  /** The highest lease epoch under the root, read. */
  static async current(store: ObjectStore): Promise<LeaseRecord | undefined> {
    let highest: number | undefined;
    try {
      for await (const info of store.list(`${LEASE_PREFIX}/`)) {
        const epoch = parseLeaseKey(info.key);
        if (epoch !== undefined && (highest === undefined || epoch > highest)) highest = epoch;
      }
    } catch (error) {
      throw storeFailure("list leases under", `${store.uri}/${LEASE_PREFIX}/`, error);
    }
    if (highest === undefined) return undefined;
    const key = leaseKey(highest);
    const bytes = await readSmallObject(store, key);
    if (bytes === undefined) return undefined;
    try {
      return leaseRecord.parse(bytes, `${store.uri}/${key}`);
    } catch (error) {
      throw new ManagerError(
        "MANAGER_LEASE_HELD",
        `read writer lease ${store.uri}/${key}: ${(error as Error).message} An unreadable lease is treated as held. ` +
          "Make sure no other job writes this checkpoint root, then remove that object.",
        { kind: "refused", subject: `${store.uri}/${key}`, cause: error },
      );
    }
  }

  static async acquire(
    store: ObjectStore,
    holder: LeaseHolder,
    ttlMs: number,
    clock: () => Date,
    onEvent: (action: "acquired" | "renewed" | "released" | "lost", key: string) => void,
  ): Promise<WriterLease> {
    for (let attempt = 0; attempt < 3; attempt++) {
      const now = clock();
      const decision = decideLease(await WriterLease.current(store), now, holder.token);
      if (decision.action === "refuse") {
        const c = decision.current;
        throw new ManagerError(
          "MANAGER_LEASE_HELD",
          `open checkpoint root ${store.uri}: another writer holds it — ${describeHolder(c.holder)}, lease ${leaseKey(c.epoch)} ` +
            `valid until ${c.expires_at}. Two jobs must not write one checkpoint root: stop the other job or give this run its own prefix. ` +
            "If that job is gone, its lease expires at the time shown (or remove the lease object once you are sure).",
          { kind: "refused", subject: `${store.uri}/${leaseKey(c.epoch)}` },
        );
      }
      const record: LeaseRecord = {
        schema: LEASE_SCHEMA,
        epoch: decision.epoch,
        holder,
        acquired_at: now.toISOString(),
        expires_at: new Date(now.getTime() + ttlMs).toISOString(),
        released: false,
      };
      const key = leaseKey(record.epoch);
      let created: Awaited<ReturnType<ObjectStore["createIfAbsent"]>>;
      try {
        created = await store.createIfAbsent(key, leaseRecord.serialize(record));
      } catch (error) {
        throw storeFailure("create writer lease", `${store.uri}/${key}`, error);
      }
      if (created.status === "created") {
        const lease = new WriterLease(store, record, ttlMs, clock, onEvent);
        onEvent("acquired", key);
        return lease;
      }
      // Another writer created this epoch first: decide again on what it wrote.
    }
    throw new ManagerError(
      "MANAGER_LEASE_HELD",
      `open checkpoint root ${store.uri}: other writers keep taking the lease. Make sure one job writes this root.`,
      { kind: "refused", subject: `${store.uri}/${LEASE_PREFIX}/` },
    );
  }

  /** Renews periodically (a third of the lifetime) until `release`; the timer never keeps the process alive. */
  startRenewing(): void {
    this.timer = setInterval(
      () => {
        this.renew().catch(() => {
          // A failed renewal is retried at the next tick; `check` before a commit decides.
        });
      },
      Math.max(1000, Math.floor(this.ttlMs / 3)),
    );
    this.timer.unref();
  }

  private lose(newer: number): ManagerError {
    if (!this.lost) {
      this.lost = true;
      this.onEvent("lost", this.key);
    }
    return new ManagerError(
      "MANAGER_LEASE_LOST",
      `write checkpoint root ${this.store.uri}: this writer's lease ${this.key} was taken over (epoch ${newer} exists), ` +
        "so another job writes here now. This job must stop writing; nothing more is committed.",
      { kind: "refused", subject: `${this.store.uri}/${leaseKey(newer)}` },
    );
  }

  /** Extends the expiry, after proving no later epoch exists. */
  async renew(): Promise<void> {
    const current = await WriterLease.current(this.store);
    if (this.lost || (current !== undefined && current.epoch > this.record.epoch))
      throw this.lose(current?.epoch ?? this.record.epoch);
    const record = {
      ...this.record,
      expires_at: new Date(this.clock().getTime() + this.ttlMs).toISOString(),
    };
    try {
      await this.store.put(this.key, leaseRecord.serialize(record));
    } catch (error) {
      throw storeFailure("renew writer lease", `${this.store.uri}/${this.key}`, error);
    }
    this.record = record;
    this.onEvent("renewed", this.key);
  }

  /** Before a commit: still the holder (no later epoch) and renewed. */
  async check(): Promise<void> {
    await this.renew();
  }

  /** Marks the lease released so the next writer may start at once; stops renewing. */
  async release(): Promise<void> {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
    if (this.lost) return;
    const current = await WriterLease.current(this.store);
    if (current !== undefined && current.epoch > this.record.epoch) return;
    const record = { ...this.record, released: true, expires_at: this.clock().toISOString() };
    try {
      await this.store.put(this.key, leaseRecord.serialize(record));
    } catch (error) {
      throw storeFailure("release writer lease", `${this.store.uri}/${this.key}`, error);
    }
    this.onEvent("released", this.key);
  }
}
