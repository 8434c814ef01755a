/**
 * The `etcd3` npm client against a real three-member cluster: KV, watch, lease keep-alive, lock and
 * election (the client builds the last two from txns, leases and watches). E2E_TARGET=etcd checks the
 * same expectations against real etcd.
 */
import { Etcd3, type IKeyValue } from "etcd3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Cluster, eventually, sleep } from "./harness.js";

let cluster: Cluster;
let client: Etcd3;

beforeAll(async () => {
  cluster = await Cluster.create({ size: 3, extraArgs: ["--heartbeat-interval=50", "--election-timeout=500"] });
  await cluster.start();
  client = new Etcd3({ hosts: cluster.members.map((m) => m.clientUrl) });
});
afterAll(async () => {
  client?.close();
  await cluster?.destroy();
});

describe("etcd3 client", () => {
  it("puts, gets, ranges and deletes", async () => {
    await client.put("e3/a").value("1");
    await client.put("e3/b").value("2");
    expect(await client.get("e3/a").string()).toBe("1");
    expect(await client.getAll().prefix("e3/").strings()).toEqual({ "e3/a": "1", "e3/b": "2" });
    expect(await client.getAll().prefix("e3/").count()).toBe(2);
    const del = await client.delete().key("e3/a").exec();
    expect(del.deleted).toBe("1");
    expect(await client.get("e3/a").string()).toBeNull();
  });

  it("compare-and-swap transactions", async () => {
    await client.put("e3/cas").value("v1");
    const won = await client.if("e3/cas", "Value", "==", "v1").then(client.put("e3/cas").value("v2")).commit();
    expect(won.succeeded).toBe(true);
    const lost = await client.if("e3/cas", "Value", "==", "v1").then(client.put("e3/cas").value("v3")).commit();
    expect(lost.succeeded).toBe(false);
    expect(await client.get("e3/cas").string()).toBe("v2");
  });

  it("watches a prefix and receives puts and deletes in order", async () => {
    const watcher = await client.watch().prefix("e3w/").create();
    const seen: string[] = [];
    watcher.on("put", (kv: IKeyValue) => seen.push(`put ${kv.key.toString()}=${kv.value.toString()}`));
    watcher.on("delete", (kv: IKeyValue) => seen.push(`delete ${kv.key.toString()}`));
    try {
      for (let i = 0; i < 20; i++) await client.put(`e3w/${i % 3}`).value(String(i));
      await client.delete().key("e3w/0");
      await eventually(async () => (seen.length >= 21 ? true : undefined), 10_000, "watch events");
      const expected = [...Array.from({ length: 20 }, (_, i) => `put e3w/${i % 3}=${i}`), "delete e3w/0"];
      expect(seen).toEqual(expected);
    } finally {
      await watcher.cancel();
    }
  });

  it("a lease kept alive outlives its TTL; once revoked its keys are gone", async () => {
    const lease = client.lease(2);
    await lease.put("e3l/k").value("v");
    await sleep(3500); // longer than the TTL: only the keep-alives keep it
    expect(await client.get("e3l/k").string()).toBe("v");
    const id = await lease.grant();
    expect(Number(id)).toBeGreaterThan(0);
    await lease.revoke();
    expect(await client.get("e3l/k").string()).toBeNull();
  });

  it("locks exclude each other", async () => {
    const first = await client.lock("e3lock").ttl(10).acquire();
    // The etcd3 client's lock is a create-if-absent txn: a held lock refuses a second holder.
    await expect(client.lock("e3lock").ttl(10).acquire()).rejects.toThrow(/Failed to acquire a lock on e3lock/);
    await first.release();
    const second = await client.lock("e3lock").ttl(10).acquire();
    await second.release();
  });

  it("an election has one leader that an observer sees", async () => {
    const election = client.election("e3elect", 5);
    const campaign = election.campaign("alice");
    await new Promise<void>((res, rej) => {
      campaign.on("elected", () => res());
      campaign.on("error", rej);
    });
    const observer = await election.observe();
    try {
      await eventually(async () => (observer.leader() === "alice" ? true : undefined), 10_000, "observer sees alice");
      expect(await election.leader()).toBe("alice");
    } finally {
      await observer.cancel();
      await campaign.resign();
    }
  });
});
