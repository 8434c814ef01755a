/**
 * Clusters whose membership changes during a test: members are added with `etcdctl member add`
 * and started exactly as its printed ETCD_* lines say (as an operator would paste them), removed
 * with `etcdctl member remove`. A steady writer puts keys through whichever members are voters and
 * remembers every acknowledged write, to be read back from every member at the end.
 */
import { mkdtempSync, rmSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { reservePort } from "../ports.js";
import { clients, unary } from "./grpc_client.js";
import { etcdctl, eventually, Member, SERVER_JS, TARGET_ETCD, type MemberSpec } from "./harness.js";

export const TIMING_ARGS = ["--heartbeat-interval=50", "--election-timeout=500"];

function baseArgs(s: MemberSpec): string[] {
  return [
    `--data-dir=${s.dataDir}`,
    `--listen-client-urls=http://127.0.0.1:${s.clientPort}`,
    `--advertise-client-urls=http://127.0.0.1:${s.clientPort}`,
    `--listen-peer-urls=http://127.0.0.1:${s.peerPort}`,
    "--initial-cluster-token=e2e-token",
    "--log-level=info",
  ];
}

export function peerUrl(s: MemberSpec): string {
  return `http://127.0.0.1:${s.peerPort}`;
}

/** The ETCD_* lines `etcdctl member add` prints, by variable. */
export function parseMemberAddEnv(stdout: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const line of stdout.split("\n")) {
    const hit = /^(ETCD_[A-Z_]+)="(.*)"$/.exec(line.trim());
    if (hit) env[hit[1]!] = hit[2]!;
  }
  return env;
}

/** The hex id `etcdctl member add` reports ("Member 5c9cfd59d04b0 added to cluster ..."). */
export function addedMemberId(stdout: string): string {
  const hit = /Member\s+([0-9a-f]+)\s+added to cluster/.exec(stdout);
  if (!hit) throw new Error(`no member id in: ${stdout}`);
  return hit[1]!;
}

export interface ListedMember {
  id: string;
  status: string;
  name: string;
  peerUrls: string;
  clientUrls: string;
  isLearner: boolean;
}

export function parseMemberList(stdout: string): ListedMember[] {
  return stdout
    .trim()
    .split("\n")
    .filter((l) => l.length > 0)
    .map((l) => {
      const f = l.split(", ");
      return { id: f[0]!, status: f[1]!, name: f[2]!, peerUrls: f[3]!, clientUrls: f[4]!, isLearner: f[5] === "true" };
    });
}

export class DynamicCluster {
  readonly members: Member[] = [];
  private constructor(
    readonly dir: string,
    private readonly extraArgs: string[],
  ) {}

  /** `size` members bootstrapped together (--initial-cluster-state=new), not started. */
  static async create(size: number, extraArgs: string[] = []): Promise<DynamicCluster> {
    if (!TARGET_ETCD && !existsSync(SERVER_JS)) throw new Error(`${SERVER_JS} missing: run 'npm run build' first`);
    const c = new DynamicCluster(mkdtempSync(join(tmpdir(), "etcetera-members-")), [...TIMING_ARGS, ...extraArgs]);
    const specs: MemberSpec[] = [];
    for (let i = 1; i <= size; i++) specs.push(await c.spec(`n${i}`));
    const initialCluster = specs.map((s) => `${s.name}=${peerUrl(s)}`).join(",");
    for (const s of specs) {
      c.members.push(
        new Member(s, [
          `--name=${s.name}`,
          ...baseArgs(s),
          `--initial-advertise-peer-urls=${peerUrl(s)}`,
          `--initial-cluster=${initialCluster}`,
          "--initial-cluster-state=new",
          ...c.extraArgs,
        ]),
      );
    }
    return c;
  }

  async spec(name: string): Promise<MemberSpec> {
    return { name, clientPort: await reservePort(), peerPort: await reservePort(), dataDir: join(this.dir, `${name}.etcd`) };
  }

  running(): Member[] {
    return this.members.filter((m) => m.running);
  }

  endpoints(members: Member[] = this.running()): string {
    return members.map((m) => m.endpoint).join(",");
  }

  async start(): Promise<void> {
    for (const m of this.members) m.start();
    await Promise.all(this.members.map((m) => m.waitReady()));
  }

  /**
   * `etcdctl member add` through `via`, then the new member started with exactly the ETCD_* lines
   * it printed (name, initial cluster, advertised peer URLs, cluster state "existing").
   */
  async add(name: string, via: Member[], opts: { learner?: boolean; start?: boolean } = {}): Promise<{ member: Member; id: string; stdout: string }> {
    const spec = await this.spec(name);
    const args = ["member", "add", name, `--peer-urls=${peerUrl(spec)}`, ...(opts.learner === true ? ["--learner"] : [])];
    const r = await etcdctl(this.endpoints(via), args);
    if (r.code !== 0) throw new Error(`etcdctl ${args.join(" ")} failed: ${r.stderr}`);
    const env = parseMemberAddEnv(r.stdout);
    const member = new Member(spec, [...baseArgs(spec), ...this.extraArgs], env);
    this.members.push(member);
    if (opts.start !== false) {
      member.start();
      await member.waitReady(60_000);
    }
    return { member, id: addedMemberId(r.stdout), stdout: r.stdout };
  }

  /**
   * `etcdctl member remove id` through `via`, retried while the strict reconfig check answers
   * "unhealthy cluster" (peers not yet connected for its HealthInterval); returns its output.
   */
  async removeSettled(id: string, via: Member[], what: string): Promise<string> {
    return eventually(
      async () => {
        const r = await etcdctl(this.endpoints(via), ["member", "remove", id]);
        if (r.code !== 0 && /unhealthy cluster/.test(r.stderr)) return undefined;
        if (r.code !== 0) throw new Error(r.stderr);
        return r.stdout;
      },
      30_000,
      what,
    );
  }

  /** The member list as `via` reports it. */
  async list(via: Member[]): Promise<ListedMember[]> {
    const r = await etcdctl(this.endpoints(via), ["member", "list"]);
    if (r.code !== 0) throw new Error(`member list failed: ${r.stderr}`);
    return parseMemberList(r.stdout);
  }

  async idOf(m: Member): Promise<string> {
    const list = await this.list(this.running().filter((x) => x !== m).concat(m));
    const hit = list.find((l) => l.peerUrls === peerUrl(m.spec));
    if (hit === undefined) throw new Error(`${m.spec.name} is not in the member list`);
    return hit.id;
  }

  /** The leader as every running voting member agrees it (its endpoint status). */
  async leader(members: Member[] = this.running()): Promise<Member> {
    return eventually(
      async () => {
        const r = await etcdctl(this.endpoints(members), ["endpoint", "status"]);
        if (r.code !== 0) return undefined;
        const lines = r.stdout.trim().split("\n").map((l) => l.split(", "));
        if (lines.length !== members.length) return undefined;
        const leaders = lines.filter((f) => f[4] === "true");
        if (leaders.length !== 1 || new Set(lines.map((f) => f[6])).size !== 1) return undefined;
        return members.find((m) => m.endpoint === leaders[0]![0]);
      },
      30_000,
      "one agreed leader",
    );
  }

  async destroy(): Promise<void> {
    await Promise.all(this.members.map((m) => m.kill("SIGKILL")));
    rmSync(this.dir, { recursive: true, force: true });
  }

  logs(): string {
    return this.members.map((m) => `==== ${m.spec.name}\n${m.log.slice(-6000)}`).join("\n");
  }
}

/** A write the cluster acknowledged. */
export interface Acked {
  key: string;
  value: string;
}

/**
 * Puts `load/<n>` keys one after another through the members `targets()` names (rotating, so a
 * member leaving or failing only costs the writes sent to it), and keeps the acknowledged ones.
 */
export class SteadyWriter {
  readonly acked: Acked[] = [];
  failures = 0;
  private stopped = false;
  private running: Promise<void> | undefined;
  private readonly conns = new Map<string, ReturnType<typeof clients>>();

  constructor(private readonly targets: () => Member[]) {}

  start(concurrency = 4): void {
    let n = 0;
    const one = async (): Promise<void> => {
      while (!this.stopped) {
        const i = n++;
        const ts = this.targets();
        const m = ts[i % ts.length];
        if (m === undefined) {
          await new Promise((r) => setTimeout(r, 50));
          continue;
        }
        const key = `load/${String(i).padStart(7, "0")}`;
        try {
          await unary(this.conn(m.endpoint).kv, "Put", { key: Buffer.from(key), value: Buffer.from(`v${i}`) }, { deadlineMs: 5000 });
          this.acked.push({ key, value: `v${i}` });
        } catch {
          this.failures++;
          await new Promise((r) => setTimeout(r, 20));
        }
      }
    };
    this.running = Promise.all(Array.from({ length: concurrency }, one)).then(() => undefined);
  }

  async waitForMore(count: number, what: string): Promise<void> {
    const want = this.acked.length + count;
    await eventually(async () => (this.acked.length >= want ? true : undefined), 60_000, what);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.running;
    for (const c of this.conns.values()) c.close();
  }

  private conn(endpoint: string): ReturnType<typeof clients> {
    let c = this.conns.get(endpoint);
    if (c === undefined) {
      c = clients(endpoint);
      this.conns.set(endpoint, c);
    }
    return c;
  }
}

/**
 * Every acknowledged write, read back from `member` with serializable ranges once it has caught
 * up: returns the ones missing or with another value.
 */
export async function lostWrites(member: Member, acked: readonly Acked[]): Promise<string[]> {
  const c = clients(member.endpoint);
  try {
    const want = new Map(acked.map((a) => [a.key, a.value]));
    const got = new Map<string, string>();
    const res = await unary<{ kvs: Array<{ key: Buffer; value: Buffer }> }>(
      c.kv,
      "Range",
      { key: Buffer.from("load/"), range_end: Buffer.from("load0"), serializable: true },
      { deadlineMs: 30_000 },
    );
    for (const kv of res.kvs) got.set(kv.key.toString(), kv.value.toString());
    const lost: string[] = [];
    for (const [k, v] of want) if (got.get(k) !== v) lost.push(`${k}=${v} (found ${got.get(k) ?? "nothing"})`);
    return lost;
  } finally {
    c.close();
  }
}
