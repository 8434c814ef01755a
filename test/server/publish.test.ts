/** publish(): a member's publication ends when its entry applies, or when a snapshot installed after the proposal shows it. */
import { describe, expect, it } from "vitest";
import { silentLogger } from "../../src/server/logger.js";
import { publish, type PublishOptions } from "../../src/server/publish.js";

function options(over: Partial<PublishOptions>): PublishOptions {
  return {
    memberId: 1n,
    clusterId: 2n,
    name: "a",
    clientUrls: ["http://127.0.0.1:2379"],
    heartbeatMs: 10,
    proposeAndApply: () => new Promise(() => {}),
    stopped: () => false,
    snapshotsInstalled: () => 0,
    attributesApplied: () => false,
    logger: silentLogger(),
    ...over,
  };
}

describe("publish", () => {
  it("is done once its entry applies", async () => {
    let proposals = 0;
    expect(await publish(options({ proposeAndApply: async () => void proposals++ }))).toBe(true);
    expect(proposals).toBe(1);
  });

  it("is done when a snapshot installed after the proposal shows its attributes, though its own entry never applies", async () => {
    let installs = 0;
    let applied = false;
    const o = options({
      proposeAndApply: () => {
        // The snapshot arrives after the proposal and carries the attributes.
        setTimeout(() => {
          installs++;
          applied = true;
        }, 20);
        return new Promise(() => {});
      },
      snapshotsInstalled: () => installs,
      attributesApplied: () => applied,
    });
    expect(await publish(o)).toBe(true);
  });

  it("does not count attributes that were there before the proposal (no snapshot since): it waits for its entry", async () => {
    let resolveApply: (() => void) | undefined;
    let done = false;
    const p = publish(
      options({
        proposeAndApply: () => new Promise<void>((r) => (resolveApply = r)),
        attributesApplied: () => true, // the backend held them from the previous run
      }),
    ).then((v) => (done = v));
    await new Promise((r) => setTimeout(r, 200));
    expect(done).toBe(false);
    resolveApply!();
    await p;
    expect(done).toBe(true);
  });

  it("retries a proposal that fails, and stops when the member stops", async () => {
    let calls = 0;
    let stop = false;
    const r = await publish(
      options({
        proposeAndApply: async () => {
          calls++;
          if (calls === 3) stop = true;
          throw new Error("etcdserver: request timed out");
        },
        stopped: () => stop,
      }),
    );
    expect(r).toBe(false);
    expect(calls).toBe(3);
  });
});
