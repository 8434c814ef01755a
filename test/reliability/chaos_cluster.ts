/**
 * A cluster of real member processes (the e2e harness's Member: etcetera, or etcd with
 * E2E_TARGET=etcd) whose peer links run through TcpProxy: each member advertises a proxy's port
 * as its peer URL and listens on its real peer port behind it. Since every member dials the same
 * advertised URL, each proxy names the dialing member from its first bytes (etcd: X-Server-From,
 * etcetera: the Hello frame) — which is what makes per-link partitions possible.
 *
 * With `powerLoss`, each member's data dir lives on its own lazyfs (test/powerloss/lazyfs.ts), one
 * machine per member, so that a fault can cut a member's power: what it never synced is gone.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { reservePort } from "../ports.js";
import { Member, SERVER_JS, TARGET_ETCD, type MemberSpec } from "../e2e/harness.js";
import { LazyFs } from "../powerloss/lazyfs.js";
import { ChaosTls } from "./chaos_tls.js";
import { EtcdConnection } from "./etcd_client.js";
import { classifyEtcdHttp, classifyEtcetera, normalizeId, TcpProxy, UNKNOWN_SOURCE } from "./proxy.js";

export interface ChaosClusterOptions {
  size: number;
  heartbeatMs: number;
  electionMs: number;
  /** Appended to every member's flags. */
  extraArgs?: string[];
  /** Environment of every member process, restarts included. */
  env?: Record<string, string>;
  /** Put each member's data dir on its own lazyfs, so that the "powerloss" fault can cut its power. */
  powerLoss?: boolean;
  /** TLS on both ports (chaos_tls.ts): https:// URLs, client and peer certificates required, proxies that terminate and re-encrypt. */
  tls?: boolean;
}

/** A member's lazyfs: the durable "disk", lazyfs's scratch space, and the mount the member uses. */
export interface MemberDisk {
  disk: string;
  work: string;
  mnt: string;
  fs: LazyFs | undefined;
  /** Power cuts so far (names each cut's log file and seeds its torn write). */
  cuts: number;
}

export interface ChaosMember {
  name: string;
  member: Member;
  proxy: TcpProxy;
  /** Member id, hex without leading zeros; known after `start`. */
  id: string;
  conn: EtcdConnection;
  /** Peak of VmHWM over every incarnation of the process, in KiB. */
  peakRssKiB: number;
  paused: boolean;
  /** Set when the cluster runs on lazyfs (ChaosClusterOptions.powerLoss). */
  disk?: MemberDisk;
}

/** VmHWM (peak resident set) of a live process in KiB, or undefined if it is gone. */
export function peakRssKiB(pid: number): number | undefined {
  try {
    const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return m === null ? undefined : Number(m[1]);
  } catch {
    return undefined;
  }
}

export class ChaosCluster {
  private rssTimer: NodeJS.Timeout | undefined;
  /** Proxies in front of members added at runtime (the membership fault's learner): partitions cut them too. */
  readonly extraProxies = new Set<TcpProxy>();

  private constructor(
    readonly dir: string,
    readonly members: ChaosMember[],
    /** Set when the cluster runs TLS on both ports. */
    readonly tls: ChaosTls | undefined,
  ) {}

  static async create(opts: ChaosClusterOptions): Promise<ChaosCluster> {
    if (!TARGET_ETCD && !existsSync(SERVER_JS)) throw new Error(`${SERVER_JS} missing: run 'npm run build' first (or E2E_TARGET=etcd)`);
    const dir = mkdtempSync(join(tmpdir(), "etcetera-chaos-"));
    const specs: MemberSpec[] = [];
    const proxies: TcpProxy[] = [];
    const tls = opts.tls === true ? ChaosTls.create(dir) : undefined;
    const scheme = tls === undefined ? "http" : "https";
    for (let i = 1; i <= opts.size; i++) {
      const dataDir = opts.powerLoss === true ? join(dir, `n${i}`, "mnt", "data") : join(dir, `n${i}.etcd`);
      const spec = { name: `n${i}`, clientPort: await reservePort(), peerPort: await reservePort(), dataDir };
      specs.push(spec);
      proxies.push(await startPeerProxy(spec.name, spec.peerPort, tls));
    }
    const advertised = (i: number) => `${scheme}://127.0.0.1:${proxies[i]!.port}`;
    const initialCluster = specs.map((s, i) => `${s.name}=${advertised(i)}`).join(",");
    const members = specs.map((s, i) => {
      const member = new Member(s, [
        `--name=${s.name}`,
        `--data-dir=${s.dataDir}`,
        `--listen-client-urls=${scheme}://127.0.0.1:${s.clientPort}`,
        `--advertise-client-urls=${scheme}://127.0.0.1:${s.clientPort}`,
        `--listen-peer-urls=${scheme}://127.0.0.1:${s.peerPort}`,
        `--initial-advertise-peer-urls=${advertised(i)}`,
        `--initial-cluster=${initialCluster}`,
        "--initial-cluster-token=chaos-token",
        "--initial-cluster-state=new",
        `--heartbeat-interval=${opts.heartbeatMs}`,
        `--election-timeout=${opts.electionMs}`,
        "--log-level=info",
        ...(tls?.memberFlags(s.name) ?? []),
        ...(opts.extraArgs ?? []),
      ], opts.env);
      const disk = opts.powerLoss === true ? { disk: join(dir, s.name, "disk"), work: join(dir, s.name, "work"), mnt: join(dir, s.name, "mnt"), fs: undefined, cuts: 0 } : undefined;
      return { name: s.name, member, proxy: proxies[i]!, id: "", conn: new EtcdConnection(member.endpoint, tls?.client), peakRssKiB: 0, paused: false, ...(disk !== undefined ? { disk } : {}) };
    });
    return new ChaosCluster(dir, members, tls);
  }

  get endpoints(): string[] {
    return this.members.map((m) => m.member.endpoint);
  }

  /** "https" when the cluster runs TLS, else "http". */
  get scheme(): string {
    return this.tls === undefined ? "http" : "https";
  }

  /** A member's client URL (the harness's Member.clientUrl is always http://). */
  clientUrl(m: Member): string {
    return `${this.scheme}://${m.endpoint}`;
  }

  /** GET a path of a member's client port (TLS: with the checker's certificate). */
  async fetchText(m: Member, path: string, timeoutMs: number): Promise<string> {
    const url = `${this.clientUrl(m)}${path}`;
    if (this.tls !== undefined) return this.tls.get(url, timeoutMs);
    return (await fetch(url, { signal: AbortSignal.timeout(timeoutMs) })).text();
  }

  /** Mounts a member's lazyfs (no-op without powerLoss or when mounted); `seed` seeds its torn write. */
  async mountDisk(m: ChaosMember, seed: number): Promise<void> {
    const d = m.disk;
    if (d === undefined || d.fs !== undefined) return;
    d.fs = await LazyFs.mount({ disk: d.disk, work: d.work, mountpoint: d.mnt, log: join(this.dir, `${m.name}-cut-${d.cuts}.log`), seed, tear: true });
  }

  /**
   * Cuts a member's power: the process dies with its machine, then lazyfs drops every write it
   * never synced. Returns lazyfs's account of what it dropped.
   */
  async powerCut(m: ChaosMember): Promise<string> {
    const d = m.disk;
    if (d === undefined || d.fs === undefined) throw new Error(`${m.name} is not on lazyfs (ChaosClusterOptions.powerLoss)`);
    this.sampleRss();
    await m.member.kill("SIGKILL");
    const dropped = await d.fs.powerCut();
    d.fs = undefined;
    d.cuts++;
    return dropped;
  }

  async start(): Promise<void> {
    for (const [i, m] of this.members.entries()) await this.mountDisk(m, i + 1);
    for (const m of this.members) m.member.start();
    await Promise.all(this.members.map((m) => m.member.waitReady(60_000)));
    const list = await this.members[0]!.conn.memberList(5_000);
    for (const pm of list) {
      const id = normalizeId(BigInt(pm.ID).toString(16));
      const m = this.members.find((x) => x.name === pm.name);
      if (m === undefined) throw new Error(`unknown member ${pm.name} in member list`);
      m.id = id;
    }
    for (const p of this.members) for (const m of this.members) p.proxy.setAlias(m.id, m.name);
    this.rssTimer = setInterval(() => this.sampleRss(), 250);
  }

  /**
   * A proxy in front of a member added at runtime (`name` listening on `peerPort`), classifying
   * as the members' do; it names the original members. Partition faults cut it whole (the added
   * member counts as an unknown source on the original members' proxies: `markUnknown`).
   */
  async startExtraProxy(name: string, peerPort: number): Promise<TcpProxy> {
    const proxy = await startPeerProxy(name, peerPort, this.tls);
    for (const m of this.members) proxy.setAlias(m.id, m.name);
    this.extraProxies.add(proxy);
    return proxy;
  }

  async closeExtraProxy(proxy: TcpProxy): Promise<void> {
    this.extraProxies.delete(proxy);
    await proxy.close();
  }

  /** Connections from the member with this raw id count as unknown on every original member's proxy. */
  markUnknown(rawId: string): void {
    for (const m of this.members) m.proxy.setAlias(normalizeId(rawId), UNKNOWN_SOURCE);
  }

  /** Samples every live member's VmHWM (also done right before a kill, which loses it). */
  sampleRss(): void {
    for (const m of this.members) {
      const pid = m.member.proc?.pid;
      if (pid === undefined) continue;
      const kib = peakRssKiB(pid);
      if (kib !== undefined && kib > m.peakRssKiB) m.peakRssKiB = kib;
    }
  }

  byId(id: string): ChaosMember | undefined {
    return this.members.find((m) => m.id === normalizeId(id));
  }

  /** The leader as the members that answer see it (undefined if none agrees or none answers). */
  async leader(timeoutMs = 1_000): Promise<ChaosMember | undefined> {
    const live = this.members.filter((m) => m.member.running && !m.paused);
    const answers = await Promise.allSettled(live.map((m) => m.conn.status(timeoutMs)));
    const votes = new Map<string, number>();
    for (const a of answers) if (a.status === "fulfilled" && a.value.leader !== "0") votes.set(a.value.leader, (votes.get(a.value.leader) ?? 0) + 1);
    const best = [...votes.entries()].sort((a, b) => b[1] - a[1])[0];
    return best === undefined ? undefined : this.byId(BigInt(best[0]).toString(16));
  }

  async destroy(): Promise<void> {
    clearInterval(this.rssTimer);
    for (const m of this.members) {
      if (m.paused) m.member.proc?.kill("SIGCONT");
      m.conn.close();
    }
    await Promise.all(this.members.map((m) => m.member.kill("SIGKILL")));
    for (const m of this.members) await m.disk?.fs?.unmount();
    await Promise.all(this.members.map((m) => m.proxy.close()));
    rmSync(this.dir, { recursive: true, force: true });
  }

  logs(): string {
    return this.members.map((m) => `==== ${m.name}\n${m.member.log.slice(-3000)}`).join("\n");
  }
}

/** The link proxy in front of a member's peer port (TLS: terminating and re-encrypting). */
function startPeerProxy(name: string, peerPort: number, tls: ChaosTls | undefined): Promise<TcpProxy> {
  return TcpProxy.start({ name, targetPort: peerPort, classify: TARGET_ETCD ? classifyEtcdHttp : classifyEtcetera, ...(tls !== undefined ? { transport: tls.proxyTransport(name) } : {}) });
}
