/**
 * Well-formed requests with random field values on every RPC (issue 7, "random field values on
 * every RPC"), sent through @grpc/grpc-js to the member under test and, in the same run and the
 * same order, to a reference etcd 3.4: every call must be answered before its deadline, every
 * success response must satisfy etcd's invariants (header present, revisions never going back,
 * count ≥ kvs, more ⇒ limit reached, ...), status codes and messages must match etcd's or be
 * a documented deviation (test/deviations.ts), and where both succeed the responses must agree
 * field by field down to nested messages (txn responses in txns, their headers and kvs), but for
 * the fields response_compare.ts's EXCLUSIONS list with their reasons.
 *
 * SEED= replays, FUZZ_SECONDS= lengthens (see fuzz_config.ts).
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { Cluster } from "../e2e/harness.js";
import { fuzzRun, timeoutMs } from "./fuzz_config.js";
import { Rng } from "./rng.js";
import { findRpcDeviation, RPC_DEVIATIONS } from "../deviations.js";
import { type RpcOp, RpcGen } from "./rpc_gen.js";
import { responseDifferences } from "./response_compare.js";
import { invariantViolations, outcomeText, TargetSession } from "./rpc_runner.js";
import { assertServing, type FuzzTarget, memberTarget, ReferenceEtcd } from "./target.js";

const run = fuzzRun("rpc_fields");
const MAX_REQUEST_BYTES = 1_572_864;
const DEADLINE_EXCEEDED = 4;

let cluster: Cluster;
let target: FuzzTarget;
let reference: ReferenceEtcd;

beforeAll(async () => {
  cluster = await Cluster.create({ size: 1 });
  await cluster.start();
  target = memberTarget(cluster.members[0]!);
  reference = await ReferenceEtcd.start();
}, 60_000);

afterAll(async () => {
  await reference?.destroy();
  await cluster?.destroy();
});

function opName(op: RpcOp): string {
  return op.kind === "unary" ? `${op.service}.${op.method}` : op.kind;
}

function brief(value: unknown): string {
  return JSON.stringify(value, (_k, v: unknown) => {
    if (v && typeof v === "object" && (v as { type?: string }).type === "Buffer") {
      const data = (v as { data: number[] }).data;
      return data.length > 24 ? `<${data.length} bytes>` : Buffer.from(data).toString("latin1");
    }
    return v;
  }).slice(0, 600);
}

describe("rpc_fields: random field values on every RPC", () => {
  test("answers before the deadline, success invariants hold, codes and messages match etcd 3.4", async () => {
    const gen = new RpcGen(new Rng(run.seed), { maxRequestBytes: MAX_REQUEST_BYTES, referenceSafe: true });
    const ours = new TargetSession(target.endpoint);
    const ref = new TargetSession(reference.endpoint);
    await ours.init();
    await ref.init();
    const failures: string[] = [];
    const undocumented: string[] = [];
    const fieldDiffs: string[] = [];
    const documented = new Map<number, number>();
    const perMethod = new Map<string, { n: number; ok: number; same: number }>();
    const stopAt = Date.now() + run.seconds * 1000;
    let i = 0;
    try {
      for (; Date.now() < stopAt || i < 150; i++) {
        const op = gen.next();
        const [a, b] = await Promise.all([ours.run(op), ref.run(op)]);
        const name = opName(op);
        const stats = perMethod.get(name) ?? { n: 0, ok: 0, same: 0 };
        perMethod.set(name, stats);
        stats.n++;
        if (a.code === 0) stats.ok++;
        const where = `op #${i} ${name} ${op.kind === "unary" ? brief(op.request) : brief(op)}`;
        // A client-side deadline is a hang: every op here is answerable at once.
        if (a.code === DEADLINE_EXCEEDED && b.code !== DEADLINE_EXCEEDED) failures.push(`${where}: no answer within the deadline (etcd: ${outcomeText(b)})`);
        for (const v of invariantViolations(op, a, ours)) failures.push(`${where}: ${v}`);
        invariantViolations(op, b, ref); // keeps the reference's revision tracking; etcd is not under test
        if (outcomeText(a) === outcomeText(b)) {
          // Same status: success bodies must agree field by field, nested messages included.
          const diffs = responseDifferences(op, a, b, ours, ref);
          if (diffs.length === 0) stats.same++;
          else fieldDiffs.push(`${where}\n    ${diffs.slice(0, 8).join("\n    ")}`);
          continue;
        }
        const d = findRpcDeviation(op, a, b);
        if (d === undefined) undocumented.push(`${where}\n    etcetera: ${outcomeText(a)}\n    etcd:     ${outcomeText(b)}`);
        else documented.set(RPC_DEVIATIONS.indexOf(d), (documented.get(RPC_DEVIATIONS.indexOf(d)) ?? 0) + 1);
        if (!reference.alive()) throw new Error(`reference etcd died at ${where}:\n${reference.panicSummary() ?? reference.logTail()}`);
      }
    } finally {
      ours.close();
      ref.close();
    }
    console.log(`[fuzz] rpc_fields: ${i} ops on ${target.label} and etcd 3.4`);
    for (const [name, s] of [...perMethod].sort()) console.log(`  ${name}: ${s.n} ops, ${s.ok} ok, ${s.same} same as etcd`);
    for (const [k, n] of documented) {
      const d = RPC_DEVIATIONS[k]!;
      console.log(`  documented deviation ×${n}${d.finding ? " (FINDING)" : ""}: ${d.why}`);
    }
    if (undocumented.length > 0) console.log(`[fuzz] undocumented deviations (${undocumented.length}):\n${undocumented.slice(0, 40).join("\n")}`);
    if (fieldDiffs.length > 0) console.log(`[fuzz] responses differing from etcd's in fields (${fieldDiffs.length}):\n${fieldDiffs.slice(0, 40).join("\n")}`);
    const replay = `replay: SEED=${run.seed} FUZZ_SECONDS=${run.seconds} npx vitest run test/fuzz/rpc_fields.test.ts`;
    expect(failures.slice(0, 20), replay).toEqual([]);
    expect(undocumented.slice(0, 10), replay).toEqual([]);
    expect(fieldDiffs.slice(0, 10), replay).toEqual([]);
    await assertServing(target, "rpc_fields");
  }, timeoutMs(run, 240_000));

  test("inputs that crash etcd 3.4 (undefined sort target, undefined Alarm action) are answered and survived", async () => {
    // Only etcetera: the reference etcd 3.4.23 panics on these (nil sorter in a sorted Range with an
    // undefined sort_target; nil AlarmResponse for an undefined action).
    const gen = new RpcGen(new Rng(run.seed ^ 0x7777), { maxRequestBytes: MAX_REQUEST_BYTES, referenceSafe: false });
    const ours = new TargetSession(target.endpoint);
    await ours.init();
    const failures: string[] = [];
    const stopAt = Date.now() + (run.seconds * 1000) / 2;
    let i = 0;
    try {
      for (; Date.now() < stopAt || i < 100; i++) {
        const op = gen.next();
        const a = await ours.run(op);
        const where = `op #${i} ${opName(op)} ${op.kind === "unary" ? brief(op.request) : brief(op)}`;
        if (a.code === DEADLINE_EXCEEDED) failures.push(`${where}: no answer within the deadline`);
        for (const v of invariantViolations(op, a, ours)) failures.push(`${where}: ${v}`);
      }
      // The two crashers, explicitly, whatever the seed drew.
      for (const sortOrder of [1, 2]) {
        const a = await ours.unary("kv", "Range", { key: Buffer.from("fz/"), range_end: Buffer.from("fz0"), sort_order: sortOrder, sort_target: 7 });
        if (a.code === DEADLINE_EXCEEDED) failures.push(`Range sort_target 7: no answer`);
      }
      for (const action of [3, -1]) {
        const a = await ours.unary("maintenance", "Alarm", { action, memberID: "0", alarm: 0 });
        if (a.code === DEADLINE_EXCEEDED) failures.push(`Alarm action ${action}: no answer`);
      }
    } finally {
      ours.close();
    }
    console.log(`[fuzz] rpc_fields (etcetera only, reference-unsafe inputs): ${i} ops`);
    expect(failures.slice(0, 20), `replay: SEED=${run.seed} npx vitest run test/fuzz/rpc_fields.test.ts`).toEqual([]);
    await assertServing(target, "rpc_fields-unsafe");
  }, timeoutMs(run, 240_000));
});
