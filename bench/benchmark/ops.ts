/**
 * The request-per-iteration commands (put, range, txn-put, txn-mixed, stm, lease-keepalive):
 * for each client, an operation that performs request number `i` of `total` and says which
 * report (series) its latency belongs to. Workers call these; nothing here knows about threads.
 */
import { randomBytes, randomInt } from "node:crypto";
import type { ClientDuplexStream } from "@grpc/grpc-js";
import type { CommandFlags } from "./flags.js";
import type { Conn } from "./conn.js";
import { METHODS, decode, encode, encodePut, list, num, prefixRangeEnd, sub, varintKey } from "./proto.js";

/** Everything a worker needs to rebuild a command's operations (structured-clone safe). */
export interface UnaryPlan {
  command: string;
  flags: CommandFlags;
  args: string[];
  /** Values drawn once in the main thread, so every worker sends the same bytes (as etcd does). */
  value: Buffer;
}

/** Performs request `i`; resolves to the index of the series (report) it belongs to. */
export type ClientOp = (i: number) => Promise<number>;

export const UNARY_COMMANDS: readonly string[] = ["put", "range", "txn-put", "txn-mixed", "stm", "lease-keepalive"];

/** Report names of a command, in series-index order. */
export function seriesOf(command: string): string[] {
  return command === "txn-mixed" ? ["txn-mixed-read", "txn-mixed-write"] : [command];
}

export function totalOf(plan: Pick<UnaryPlan, "flags">): number {
  return plan.flags.total as number;
}

/** Per-second limit from --rate (0 = none). */
export function rateOf(plan: Pick<UnaryPlan, "flags">): number {
  const r = plan.flags.rate;
  return typeof r === "number" ? r : 0;
}

export function valueSizeOf(command: string, flags: CommandFlags): number {
  if (command === "put" || command === "txn-put" || command === "txn-mixed") return flags["val-size"] as number;
  return 0;
}

/** Builds the plan in the main thread: draws the random value once. */
export function makePlan(command: string, flags: CommandFlags, args: string[]): UnaryPlan {
  return { command, flags, args, value: randomBytes(valueSizeOf(command, flags)) };
}

function keyIndex(i: number, flags: CommandFlags, sequentialFlag: boolean): number {
  const space = flags["key-space-size"] as number;
  return sequentialFlag ? i % space : randomInt(0, space);
}

const rangeBytes = (args: string[]) => ({
  key: Buffer.from(args[0] ?? ""),
  range_end: args[1] === undefined ? Buffer.alloc(0) : Buffer.from(args[1]),
});

/** Creates the operation one client runs; may do per-client setup (a lease, a stream). */
export async function makeClientOp(plan: UnaryPlan, conn: Conn): Promise<ClientOp> {
  const { flags, args } = plan;
  // Structured cloning into the worker turned the Buffer into a plain Uint8Array.
  const value = Buffer.from(plan.value.buffer, plan.value.byteOffset, plan.value.byteLength);
  switch (plan.command) {
    case "put": {
      const keySize = flags["key-size"] as number;
      const seq = flags["sequential-keys"] as boolean;
      return async (i) => {
        await conn.unary(METHODS.put, encodePut(varintKey(keyIndex(i, flags, seq), keySize), value));
        return 0;
      };
    }
    case "range": {
      // Same request every time: encode once.
      const req = encode("RangeRequest", { ...rangeBytes(args), serializable: flags.consistency === "s" });
      return async () => {
        await conn.unary(METHODS.range, req);
        return 0;
      };
    }
    case "txn-put": {
      const keySize = flags["key-size"] as number;
      const ops = flags["txn-ops"] as number;
      const space = flags["key-space-size"] as number;
      return async (i) => {
        const success = [];
        for (let j = 0; j < ops; j++) success.push({ request_put: { key: varintKey((i * ops + j) % space, keySize), value } });
        await conn.unary(METHODS.txn, encode("TxnRequest", { success }));
        return 0;
      };
    }
    case "txn-mixed": {
      const keySize = flags["key-size"] as number;
      const ratio = flags["rw-ratio"] as number;
      const space = flags["key-space-size"] as number;
      const { key } = rangeBytes(args);
      const endKey = args[1] ?? (flags["end-key"] as string);
      // etcd reads with WithRange(end) + WithPrefix(): without an end that is the key's prefix range.
      const rangeEnd = endKey !== "" ? Buffer.from(endKey) : prefixRangeEnd(key);
      const read = encode("TxnRequest", {
        success: [{ request_range: { key, range_end: rangeEnd, limit: flags.limit as number, serializable: flags.consistency === "s" } }],
      });
      return async (i) => {
        if (Math.random() < ratio / (1 + ratio)) {
          await conn.unary(METHODS.txn, read);
          return 0;
        }
        await conn.unary(METHODS.txn, encode("TxnRequest", { success: [{ request_put: { key: varintKey(i % space, keySize), value } }] }));
        return 1;
      };
    }
    case "stm":
      return stmOp(plan, conn);
    case "lease-keepalive":
      return leaseKeepAliveOp(conn);
    default:
      throw new Error(`not a unary command: ${plan.command}`);
  }
}

const STM_KEY_PREFIX = "stm-bench/";
/** Retries of one STM transaction before it counts as an error (etcd retries forever). */
const STM_RETRIES_MAX = 1000;

/**
 * A software transactional memory transaction as clientv3/concurrency's STM runs it: read the
 * keys (at one revision for serializable isolations), write each value + 1, commit with a Txn
 * guarded by the read keys' mod revisions, retry on conflict.
 */
function stmOp(plan: UnaryPlan, conn: Conn): ClientOp {
  const keys = plan.flags.keys as number;
  const perTxn = plan.flags["keys-per-txn"] as number;
  const iso = plan.flags.isolation as string;
  return async () => {
    const picked = new Set<number>();
    while (picked.size < perTxn) picked.add(randomInt(0, keys));
    const names = [...picked].map((k) => Buffer.from(`${STM_KEY_PREFIX}${k}`));
    for (let attempt = 0; attempt < STM_RETRIES_MAX; attempt++) {
      let readRev = 0;
      const reads: Array<{ key: Buffer; modRev: number; value: number }> = [];
      for (const key of names) {
        const serializableRead = (iso === "s" || iso === "ss") && readRev > 0;
        const resp = decode(
          "RangeResponse",
          await conn.unary(METHODS.range, encode("RangeRequest", { key, revision: serializableRead ? readRev : 0, serializable: serializableRead })),
        );
        if (readRev === 0) readRev = num(sub(resp, "header"), "revision");
        const kv = list(resp, "kvs")[0];
        reads.push({ key, modRev: kv === undefined ? 0 : num(kv, "mod_revision"), value: kv === undefined ? 0 : Number(String(kv.value)) || 0 });
      }
      const compare =
        iso === "c"
          ? []
          : reads.map((r) =>
              iso === "ss"
                ? { result: "LESS", target: "MOD", key: r.key, mod_revision: readRev + 1 }
                : { result: "EQUAL", target: "MOD", key: r.key, mod_revision: r.modRev },
            );
      const success = reads.map((r) => ({ request_put: { key: r.key, value: Buffer.from(String(r.value + 1)) } }));
      const resp = decode("TxnResponse", await conn.unary(METHODS.txn, encode("TxnRequest", { compare, success })));
      if (resp.succeeded === true) return 0;
    }
    throw new Error(`stm: no commit after ${STM_RETRIES_MAX} attempts`);
  };
}

/** Grants a lease (TTL 100 s, as etcd's tool) and keeps it alive over one stream, one request at a time. */
async function leaseKeepAliveOp(conn: Conn): Promise<ClientOp> {
  const grant = decode("LeaseGrantResponse", await conn.unary(METHODS.leaseGrant, encode("LeaseGrantRequest", { TTL: 100 })));
  const id = num(grant, "ID");
  if (id === 0) throw new Error(`lease grant failed: ${String(grant.error)}`);
  const req = encode("LeaseKeepAliveRequest", { ID: id });
  const stream: ClientDuplexStream<Buffer, Buffer> = conn.bidi(METHODS.leaseKeepAlive);
  let waiter: { res: () => void; rej: (e: unknown) => void } | undefined;
  let failure: unknown;
  stream.on("data", () => {
    const w = waiter;
    waiter = undefined;
    w?.res();
  });
  stream.on("error", (e) => {
    failure = e;
    waiter?.rej(e);
    waiter = undefined;
  });
  return (_i) =>
    new Promise<number>((res, rej) => {
      if (failure !== undefined) return rej(failure);
      waiter = { res: () => res(0), rej };
      stream.write(req);
    });
}
