/**
 * The front-end pipe over a real socket pair: frames written into its one output buffer arrive
 * intact and in order, also when the reader stops reading for a while (the socket then still
 * holds a turn's buffer, which must not be written over), and a frame larger than the buffer kept
 * goes through whole.
 */
import { describe, expect, it } from "vitest";
import { type Frame, FrameKind } from "../../../src/server/front_end/frame.js";
import { FramePipe } from "../../../src/server/front_end/pipe.js";
import { socketPair } from "./socket_pair.js";

async function until(cond: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** A reply's bytes that say which frame they belong to. */
function body(n: number, bytes: number): Buffer {
  const b = Buffer.alloc(bytes, n % 251);
  b.writeUInt32BE(n, 0);
  return b;
}

describe("front-end pipe", () => {
  it("delivers every frame intact and in order while the reader stalls and resumes", async () => {
    const [a, b] = await socketPair();
    const got: Frame[] = [];
    let error: Error | undefined;
    const sender = new FramePipe(a, { frame: () => {}, closed: (e) => (error ??= e) });
    new FramePipe(b, { frame: (f) => got.push(f), closed: (e) => (error ??= e) });
    b.pause();
    setTimeout(() => b.resume(), 300);
    let n = 0;
    // 200 turns of 30 frames of ~2 KB, ~12 MB in all: far past what the sockets buffer while paused.
    for (let turn = 0; turn < 200; turn++) {
      for (let i = 0; i < 30; i++, n++) sender.send(FrameKind.Reply, n, [body(n, 2048)]);
      await new Promise((r) => setImmediate(r));
    }
    await until(() => got.length === n || error !== undefined, `${n} frames`);
    expect(error).toBeUndefined();
    got.forEach((f, i) => {
      expect(f.kind).toBe(FrameKind.Reply);
      expect(f.id).toBe(i);
      expect((f.values[0] as Buffer).equals(body(i, 2048)), `frame ${i}`).toBe(true);
    });
  });

  it("sends a frame larger than the buffer it keeps, between small ones", async () => {
    const [a, b] = await socketPair();
    const got: Frame[] = [];
    const sender = new FramePipe(a, { frame: () => {}, closed: () => {} });
    new FramePipe(b, { frame: (f) => got.push(f), closed: () => {} });
    sender.send(FrameKind.Reply, 1, [body(1, 100)]);
    sender.send(FrameKind.Reply, 2, [body(2, 3 * 1024 * 1024)]);
    sender.send(FrameKind.Status, 3, [0, "done", ["k", "v"]]);
    await new Promise((r) => setImmediate(r));
    sender.send(FrameKind.Reply, 4, [body(4, 100)]);
    await until(() => got.length === 4, "4 frames");
    expect(got.map((f) => f.id)).toEqual([1, 2, 3, 4]);
    expect((got[1]!.values[0] as Buffer).equals(body(2, 3 * 1024 * 1024))).toBe(true);
    expect(got[2]!.values).toEqual([0, "done", ["k", "v"]]);
    expect((got[3]!.values[0] as Buffer).equals(body(4, 100))).toBe(true);
  });
});
