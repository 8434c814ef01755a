/**
 * `etcdctl make-mirror` as a live migration path: from real etcd to etcetera and from etcetera to
 * real etcd. make-mirror copies the source's keys at one revision (paged ranges at that revision,
 * 1000 keys a page), then follows the source's watch from the next revision and replays each
 * revision's events as one Txn on the destination, until it is killed. It keeps keys and values,
 * not revisions: the destination's keyspace must equal the source's (under the mirrored prefix,
 * renamed as --dest-prefix / --no-dest-prefix say), including overwrites, deletes and prefix
 * deletes written while it runs.
 *
 * The real etcd side is etcd whatever E2E_TARGET says; the "etcetera" side is E2E_TARGET's server
 * (with E2E_TARGET=etcd both are etcd: the reference run of the same checks).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { afterEach, describe, expect, it } from "vitest";
import { clients, unary } from "./grpc_client.js";
import { Cluster, ETCDCTL, eventually, TARGET_ETCD, type Target } from "./harness.js";

const OURS: Target = TARGET_ETCD ? "etcd" : "etcetera";

interface Kv {
  key: Buffer;
  value: Buffer;
}

interface Case {
  name: string;
  from: Target;
  to: Target;
  /** make-mirror's flags besides the destination. */
  flags: string[];
  /** The destination key of a source key, or undefined when it is not mirrored (etcdctl's modifyPrefix). */
  map: (key: Buffer) => Buffer | undefined;
  /** Keys written before make-mirror starts beyond one page of its initial copy (1000). */
  bulk: number;
}

/** Keys under `prefix` keep their name (make-mirror's default --dest-prefix is --prefix). */
const samePrefix = (prefix: string) => (key: Buffer) => (key.subarray(0, prefix.length).equals(Buffer.from(prefix)) ? key : undefined);
/** Keys under `prefix` go under `dest` instead (strings.Replace of the first occurrence of the prefix). */
const renamed = (prefix: string, dest: string) => (key: Buffer) =>
  key.subarray(0, prefix.length).equals(Buffer.from(prefix)) ? Buffer.concat([Buffer.from(dest), key.subarray(prefix.length)]) : undefined;

const CASES: Case[] = [
  { name: "etcd → etcetera, --prefix", from: "etcd", to: OURS, flags: ["--prefix=/app/"], map: samePrefix("/app/"), bulk: 1100 },
  { name: "etcetera → etcd, --prefix", from: OURS, to: "etcd", flags: ["--prefix=/app/"], map: samePrefix("/app/"), bulk: 1100 },
  { name: "etcetera → etcd, the whole keyspace under --dest-prefix", from: OURS, to: "etcd", flags: ["--dest-prefix=/from/"], map: renamed("", "/from/"), bulk: 0 },
  { name: "etcd → etcetera, --prefix --no-dest-prefix", from: "etcd", to: OURS, flags: ["--prefix=/app/", "--no-dest-prefix"], map: renamed("/app/", ""), bulk: 0 },
  { name: "etcetera → etcd, --prefix --dest-prefix", from: OURS, to: "etcd", flags: ["--prefix=/app/", "--dest-prefix=/moved/"], map: renamed("/app/", "/moved/"), bulk: 0 },
];

const b = (s: string) => Buffer.from(s);
type Clients = ReturnType<typeof clients>;

async function put(c: Clients, key: string | Buffer, value: string | Buffer): Promise<void> {
  await unary(c.kv, "Put", { key: typeof key === "string" ? b(key) : key, value: typeof value === "string" ? b(value) : value });
}

async function del(c: Clients, key: string, prefix = false): Promise<void> {
  const rangeEnd = prefix ? Buffer.concat([b(key.slice(0, -1)), Buffer.from([key.charCodeAt(key.length - 1) + 1])]) : Buffer.alloc(0);
  await unary(c.kv, "DeleteRange", { key: b(key), range_end: rangeEnd });
}

/** Every key of the keyspace with its value. */
async function keyspace(c: Clients): Promise<Kv[]> {
  const r = await unary<{ kvs: Kv[]; more: boolean }>(c.kv, "Range", { key: Buffer.from([0]), range_end: Buffer.from([0]) }, { deadlineMs: 20_000 });
  expect(r.more).toBe(false);
  return r.kvs.map((kv) => ({ key: Buffer.from(kv.key), value: Buffer.from(kv.value) }));
}

/** A keyspace as sorted "hex(key)=hex(value)" lines: comparable with toEqual, readable in a diff. */
function lines(kvs: Kv[]): string[] {
  return kvs.map((kv) => `${kv.key.toString("hex")}=${kv.value.toString("hex")}`).sort();
}

/** What the destination must hold: the source's mirrored keys under their destination names. */
function expected(source: Kv[], map: Case["map"]): Kv[] {
  const out: Kv[] = [];
  for (const kv of source) {
    const key = map(kv.key);
    if (key !== undefined) out.push({ key, value: kv.value });
  }
  return out;
}

class Mirror {
  readonly proc: ChildProcess;
  output = "";
  exited: number | null | undefined;
  private readonly gone: Promise<void>;

  constructor(source: string, dest: string, flags: string[]) {
    this.proc = spawn(ETCDCTL, [`--endpoints=${source}`, "--dial-timeout=5s", "make-mirror", ...flags, dest], {
      env: { ...process.env, ETCDCTL_API: "3" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    const append = (d: Buffer) => {
      this.output += d.toString();
    };
    this.proc.stdout?.on("data", append);
    this.proc.stderr?.on("data", append);
    this.gone = new Promise((r) =>
      this.proc.on("exit", (code) => {
        this.exited = code;
        r();
      }),
    );
  }

  /** make-mirror only ends by an error: a wait that sees it gone fails with what it said. */
  alive(): void {
    if (this.exited !== undefined) throw new Error(`make-mirror exited (${this.exited}): ${this.output}`);
  }

  async kill(): Promise<void> {
    if (this.exited === undefined) this.proc.kill("SIGKILL");
    await this.gone;
  }
}

const cleanup: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

async function started(target: Target): Promise<Cluster> {
  const c = await Cluster.create({ size: 1, target });
  cleanup.push(() => c.destroy());
  await c.start();
  return c;
}

describe("etcdctl make-mirror: a live migration between etcd and etcetera", () => {
  for (const tc of CASES) {
    it(tc.name, async () => {
      const [src, dst] = [await started(tc.from), await started(tc.to)];
      const s = clients(src.members[0]!.endpoint);
      const d = clients(dst.members[0]!.endpoint);
      cleanup.push(async () => {
        s.close();
        d.close();
      });

      // Before make-mirror starts: what its initial copy takes (more than one page when bulk > 1000).
      for (let i = 0; i < tc.bulk; i += 100) {
        const success = [];
        for (let j = i; j < Math.min(i + 100, tc.bulk); j++) success.push({ request_put: { key: b(`/app/bulk/${String(j).padStart(4, "0")}`), value: b(`bulk-${j}`) } });
        await unary(s.kv, "Txn", { success });
      }
      await put(s, "/app/a", "a1");
      await put(s, "/app/a", "a2");
      await put(s, "/app/b", "b1");
      await put(s, "/app/c/d", "d1");
      await put(s, "/other/x", "x1");
      await del(s, "/app/b");

      const mirror = new Mirror(src.members[0]!.endpoint, dst.members[0]!.endpoint, tc.flags);
      cleanup.push(() => mirror.kill());

      /** Waits until the destination holds exactly the source's mirrored keyspace; returns it. */
      const converged = async (what: string): Promise<string[]> => {
        let last: { want: string[]; got: string[] } | undefined;
        try {
          return await eventually(
            async () => {
              mirror.alive();
              const want = lines(expected(await keyspace(s), tc.map));
              const got = lines(await keyspace(d));
              last = { want, got };
              return JSON.stringify(got) === JSON.stringify(want) ? got : undefined;
            },
            60_000,
            `the destination to hold the source's keys ${what}`,
          );
        } catch (e) {
          if (last !== undefined) expect(last.got, `${String(e)}\nmake-mirror said: ${mirror.output}`).toEqual(last.want);
          throw e;
        }
      };
      const mapped = (key: string) => tc.map(b(key))!.toString("hex");
      const has = (state: string[], key: string, value: string) => state.includes(`${mapped(key)}=${b(value).toString("hex")}`);
      const hasKey = (state: string[], key: string) => state.some((l) => l.startsWith(`${mapped(key)}=`));

      let state = await converged("of before make-mirror started");
      expect(has(state, "/app/a", "a2")).toBe(true);
      expect(has(state, "/app/c/d", "d1")).toBe(true);
      expect(hasKey(state, "/app/b")).toBe(false);
      expect(state.length).toBe(tc.bulk + 2 + (tc.map(b("/other/x")) === undefined ? 0 : 1));

      // While it runs: new keys, an overwrite, a delete of a key it copied, a txn of several
      // writes at one revision, a binary key and value, an empty value, a key outside the prefix.
      await put(s, "/app/e", "e1");
      await put(s, "/app/a", "a3");
      await del(s, "/app/c/d");
      for (let i = 1; i <= 5; i++) await put(s, `/app/dir/${i}`, `dir-${i}`);
      await unary(s.kv, "Txn", {
        success: [{ request_put: { key: b("/app/t1"), value: b("t1") } }, { request_put: { key: b("/app/t2"), value: b("t2") } }, { request_delete_range: { key: b("/app/e") } }],
      });
      await put(s, Buffer.concat([b("/app/bin/"), Buffer.from([0x00, 0xff, 0x80])]), Buffer.from([0xfe, 0x00, 0x01]));
      await put(s, "/app/empty", "");
      await put(s, "/other/y", "y1");
      state = await converged("written while make-mirror ran");
      expect(has(state, "/app/a", "a3")).toBe(true);
      expect(has(state, "/app/t1", "t1") && has(state, "/app/t2", "t2") && has(state, "/app/dir/5", "dir-5")).toBe(true);
      expect(has(state, "/app/empty", "")).toBe(true);
      expect(hasKey(state, "/app/c/d") || hasKey(state, "/app/e")).toBe(false);

      // Later still: a prefix delete (five deletes at one revision), another overwrite, the bulk keys deleted.
      await del(s, "/app/dir/", true);
      await put(s, "/app/a", "a4");
      // In slices: make-mirror replays one revision as one Txn, and a revision deleting more keys
      // than the destination's --max-txn-ops (128) stops it ("too many operations in txn request").
      for (let i = 0; i < tc.bulk; i += 100) {
        await unary(s.kv, "DeleteRange", { key: b(`/app/bulk/${String(i).padStart(4, "0")}`), range_end: b(`/app/bulk/${String(i + 100).padStart(4, "0")}`) });
      }
      state = await converged("after a prefix delete");
      expect(has(state, "/app/a", "a4")).toBe(true);
      expect(state.some((l) => l.startsWith(mapped("/app/dir/")))).toBe(false);
      expect(state.length).toBe(5 + (tc.map(b("/other/x")) === undefined ? 0 : 2));
      mirror.alive();
    }, 180_000);
  }
});
