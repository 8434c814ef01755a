/**
 * A seeded fuzz of the Authenticate and token paths over the wire (issue 14), on a member with auth
 * enabled: random names and passwords (empty, long, non-UTF-8, near misses of the real ones) to
 * Authenticate, and random token metadata (garbage, forged simple tokens, truncated real tokens and
 * mutations of a real one's random part, JWT-shaped strings) on Put and Range. Every answer must be one etcd gives: a token
 * only for the real credentials, otherwise "authentication failed" / "user name is empty" /
 * "invalid auth token" with their status codes; no forged token writes anything, and the member
 * keeps serving. E2E_TARGET=etcd runs the same against real etcd. The seed is printed.
 */
import * as grpc from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mulberry32 } from "../prng.js";
import { testSeed } from "../seed.js";
import { clients, unary, type CallError } from "./grpc_client.js";
import { Cluster, etcdctl } from "./harness.js";

let cluster: Cluster;
let c: ReturnType<typeof clients>;
const ROUNDS = 150;

beforeAll(async () => {
  cluster = await Cluster.create({ size: 1, extraArgs: ["--bcrypt-cost=4"] });
  await cluster.start();
  const ep = cluster.endpoints;
  for (const args of [["user", "add", "root:rootpw"], ["role", "add", "root"], ["user", "grant-role", "root", "root"], ["user", "add", "u1:u1pw"], ["auth", "enable"]]) {
    const r = await etcdctl(ep, args);
    if (r.code !== 0) throw new Error(`etcdctl ${args.join(" ")}: ${r.stderr}`);
  }
  c = clients(cluster.members[0]!.endpoint);
}, 60_000);
afterAll(async () => {
  c?.close();
  await cluster?.destroy();
});

function outcome(p: Promise<unknown>): Promise<string> {
  return p.then(
    () => "ok",
    (e: CallError) => `${e.code} ${e.details}`,
  );
}

describe("Authenticate and tokens under random input", () => {
  it("answer only etcd's outcomes, issue no token to a wrong password, and let no forged token write", { timeout: 180_000 }, async () => {
    const seed = testSeed("auth wire fuzz");
    console.log(`auth wire fuzz seed ${seed}`);
    const rnd = mulberry32(seed);
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)]!;
    const bytes = (n: number) => Buffer.from(Array.from({ length: n }, () => Math.floor(rnd() * 256)));
    const letters = (n: number) => Array.from({ length: n }, () => String.fromCharCode(33 + Math.floor(rnd() * 94))).join("");
    const mutate = (s: string) => {
      if (s.length === 0) return letters(1);
      const i = Math.floor(rnd() * s.length);
      return pick([s.slice(0, i), s.slice(0, i) + letters(1) + s.slice(i + 1), s + letters(1 + Math.floor(rnd() * 3)), s.slice(i) + s.slice(0, i)]);
    };
    const realToken = (await unary<{ token: string }>(c.auth, "Authenticate", { name: "u1", password: "u1pw" })).token;
    const [realPrefix, realIndex] = realToken.split(".") as [string, string];
    const seen = new Map<string, number>();
    const count = (k: string) => seen.set(k, (seen.get(k) ?? 0) + 1);

    for (let round = 0; round < ROUNDS; round++) {
      const name = pick([() => "u1", () => "root", () => "", () => mutate("u1"), () => letters(1 + Math.floor(rnd() * 40)), () => bytes(8).toString("latin1"), () => "u1\u0000"])();
      const password = pick([() => (name === "u1" ? "u1pw" : "x"), () => "", () => mutate("u1pw"), () => mutate("rootpw"), () => letters(Math.floor(rnd() * 100)), () => bytes(16).toString("latin1")])();
      const real = (name === "u1" && password === "u1pw") || (name === "root" && password === "rootpw");
      const auth = await outcome(unary(c.auth, "Authenticate", { name, password }));
      const okAuth = real ? "ok" : `${grpc.status.INVALID_ARGUMENT} etcdserver: authentication failed, invalid user ID or password`;
      expect(auth, `round ${round}: Authenticate ${JSON.stringify(name)} ${JSON.stringify(password)} (seed ${seed})`).toBe(okAuth);
      count(`authenticate ${auth}`);

      const token = pick([
        () => letters(1 + Math.floor(rnd() * 60)),
        // A simple token's index at or below the applied one: etcd waits for a later index to be
        // applied before it answers (a forged far index is a deadline, in etcd as here).
        () => `${letters(16)}.${1 + Math.floor(rnd() * 5)}`,
        () => `${mutate(realPrefix)}.${realIndex}`,
        () => realToken.slice(0, Math.floor(rnd() * realToken.length)),
        () => `${Buffer.from('{"alg":"none"}').toString("base64url")}.${Buffer.from('{"username":"root","revision":1}').toString("base64url")}.`,
        () => `${letters(10)}.${letters(20)}.${letters(30)}`,
      ])();
      // A mutation can give back the real token itself: that one is valid.
      // (An empty token sent is a token too: invalid, in etcd as here.)
      const expected = token === realToken ? "ok" : `${grpc.status.UNAUTHENTICATED} etcdserver: invalid auth token`;
      const key = Buffer.from(`fuzz/${round}`);
      // etcd reads the token from metadata; a value gRPC cannot carry (non-printable) is not sent.
      const md = /^[\x20-\x7e]*$/.test(token) ? { metadata: { token } } : {};
      const sent = "metadata" in md ? expected : `${grpc.status.INVALID_ARGUMENT} etcdserver: user name is empty`;
      const put = await outcome(unary(c.kv, "Put", { key, value: Buffer.from("x") }, md));
      expect(put, `round ${round}: Put with token ${JSON.stringify(token)} (seed ${seed})`).toBe(sent === "ok" ? `${grpc.status.PERMISSION_DENIED} etcdserver: permission denied` : sent);
      const range = await outcome(unary(c.kv, "Range", { key }, md));
      expect(range, `round ${round}: Range with token ${JSON.stringify(token)} (seed ${seed})`).toBe(sent === "ok" ? `${grpc.status.PERMISSION_DENIED} etcdserver: permission denied` : sent);
      count(`token ${put}`);
    }
    console.log(`auth wire fuzz outcomes: ${JSON.stringify([...seen])}`);
    // Nothing was written, and the member still serves root.
    const rest = await etcdctl(cluster.endpoints, ["--user", "root:rootpw", "get", "fuzz/", "--prefix", "--keys-only"]);
    expect([rest.code, rest.stdout], rest.stderr).toEqual([0, ""]);
  });
});
