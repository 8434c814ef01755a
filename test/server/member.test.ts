import { createHash } from "node:crypto";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { parseConfig } from "../../src/server/config.js";
import { computeClusterId, computeMemberId, formatId, initialClusterInfo, parseId } from "../../src/server/member.js";
import { testSeed } from "../seed.js";

const SEED = testSeed("member");

/** etcd's full 64-bit member id, as a hex string. */
function etcdMemberIdHex(urls: string[], token: string): string {
  return createHash("sha1").update([...urls].sort().join("") + token).digest().subarray(0, 8).toString("hex");
}

describe("member ids", () => {
  it("are etcd's, all 64 bits (etcd 3.4 printed 8e9e05c52164694d for the default member)", () => {
    expect(etcdMemberIdHex(["http://localhost:2380"], "etcd-cluster")).toBe("8e9e05c52164694d");
    const id = computeMemberId(["http://localhost:2380"], "etcd-cluster");
    expect(id).toBe(0x8e9e05c52164694dn);
    expect(formatId(id)).toBe("8e9e05c52164694d");
    // etcd 3.4 printed 44c6a1bc2de762b5 for a member at http://127.0.0.1:41390.
    expect(formatId(computeMemberId(["http://127.0.0.1:41390"], "etcd-cluster"))).toBe("44c6a1bc2de762b5");
  });

  it("are stable (pinned values), sorted-URL based and token dependent", () => {
    const urls = ["http://127.0.0.1:2380", "http://10.0.0.1:2380"];
    const id = computeMemberId(urls, "tok");
    expect(computeMemberId([...urls].reverse(), "tok")).toBe(id);
    expect(computeMemberId(urls, "other")).not.toBe(id);
    expect(formatId(id)).toBe(etcdMemberIdHex(urls, "tok"));
    // A runtime-added member includes the time, so re-adding gives a new id.
    expect(computeMemberId(urls, "tok", 1_700_000_000)).not.toBe(computeMemberId(urls, "tok", 1_700_000_001));
  });

  it("are uint64s equal to etcd's and format/parse round-trip (property)", () => {
    fc.assert(
      fc.property(fc.array(fc.webUrl(), { minLength: 1, maxLength: 3 }), fc.string(), (urls, token) => {
        const id = computeMemberId(urls, token);
        expect(typeof id).toBe("bigint");
        expect(id < 2n ** 64n).toBe(true);
        const hex = formatId(id);
        expect(hex).toBe(etcdMemberIdHex(urls, token));
        expect(parseId(hex)).toBe(id);
      }),
      { seed: SEED, numRuns: 200 },
    );
  });

  it("parseId accepts etcdctl's forms, all 64 bits, and refuses what is no id", () => {
    expect(parseId("e05c52164694d")).toBe(parseId("000e05c52164694d"));
    expect(parseId("8e9e05c52164694d")).toBe(0x8e9e05c52164694dn);
    expect(formatId(parseId("8e9e05c52164694d"))).toBe("8e9e05c52164694d");
    expect(formatId(1n)).toBe("0000000000000001");
    expect(() => parseId("18e9e05c52164694d")).toThrow(/invalid member id/);
    expect(() => parseId("xyz")).toThrow(/invalid member id/);
    expect(() => formatId(2n ** 64n)).toThrow(/invalid member id/);
  });
});

describe("cluster id", () => {
  it("is etcd's sha1 over the sorted big-endian member ids, first 8 bytes", () => {
    const ids = [computeMemberId(["http://a:2380"], "t"), computeMemberId(["http://b:2380"], "t")];
    const words = Buffer.alloc(16);
    const sorted = [...ids].sort((x, y) => (x < y ? -1 : x > y ? 1 : 0));
    sorted.forEach((id, i) => words.writeBigUInt64BE(BigInt(id), 8 * i));
    const expected = createHash("sha1").update(words).digest().subarray(0, 8).toString("hex");
    expect(formatId(computeClusterId(ids))).toBe(expected);
    expect(computeClusterId([...ids].reverse())).toBe(computeClusterId(ids));
  });

  it("every member of a --peers cluster derives the same ids", () => {
    const peers = "n1=http://127.0.0.1:2380,n2=http://127.0.0.1:22380,n3=http://127.0.0.1:32380";
    const infos = ["n1", "n2", "n3"].map((name) => initialClusterInfo(parseConfig(["--name", name, "--peers", peers], {})));
    expect(new Set(infos.map((i) => i.clusterId)).size).toBe(1);
    expect(infos.map((i) => i.local.name)).toEqual(["n1", "n2", "n3"]);
    expect(new Set(infos.map((i) => i.local.id)).size).toBe(3);
    expect(infos[0]!.members.map((m) => m.id)).toEqual(infos[2]!.members.map((m) => m.id));
    expect(infos[0]!.members[1]!.peerUrls).toEqual(["http://127.0.0.1:22380"]);
    // A different token is a different cluster.
    const other = initialClusterInfo(parseConfig(["--name", "n1", "--peers", peers, "--initial-cluster-token", "x"], {}));
    expect(other.clusterId).not.toBe(infos[0]!.clusterId);
  });
});
