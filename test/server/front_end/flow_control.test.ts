/**
 * Flow control of the front-end hand-off (src/server/front_end): a core-side FrontEndLink and a
 * front end's FramePipe on the two ends of a real loopback socket. A streaming handler that writes
 * as long as write() says yes must stop when the front end says its client is backed up
 * (WritePause), wait in drain() until WriteResume, and never get ahead of the pipe by more than a
 * turn's batch; the front end's Cancel reaches the handler as an aborted signal.
 */
import { describe, expect, it } from "vitest";
import type { RegisteredMethod } from "../../../src/grpc/call.js";
import type { CallContext, ServerWritable } from "../../../src/grpc/handler.js";
import type { MessageCodec } from "../../../src/pb/codec.js";
import { type Frame, FrameKind } from "../../../src/server/front_end/frame.js";
import { BATCH_BYTES_HIGH, FramePipe } from "../../../src/server/front_end/pipe.js";
import { FrontEndLink } from "../../../src/server/front_end/front_end_link.js";
import { socketPair } from "./socket_pair.js";

const bytesCodec: MessageCodec<unknown> = {
  typeName: "bytes",
  decode: (b: Buffer) => b,
  encode: (m: unknown) => m as Buffer,
  encodeFramed: (m: unknown) => m as Buffer,
};

const MESSAGE = Buffer.alloc(1024, 1);
const TOTAL = 2000;

interface HandlerState {
  written: number;
  /** write() calls made while the front end had said "paused" and not yet "resumed". */
  writtenWhilePaused: number;
  waitingInDrain: boolean;
  aborted: boolean;
}


function turns(n: number): Promise<void> {
  return n === 0 ? Promise.resolve() : new Promise((r) => setImmediate(() => void turns(n - 1).then(r)));
}

describe("front-end flow control", () => {
  it("a paused client stops the core's handler in drain() until it resumes", async () => {
    const [coreSocket, frontSocket] = await socketPair();
    const state: HandlerState = { written: 0, writtenWhilePaused: 0, waitingInDrain: false, aborted: false };
    let clientPaused = false;
    const method: RegisteredMethod = {
      descriptor: { path: "/t.S/Watch", service: "t.S", name: "Watch", requestStream: false, responseStream: true, request: bytesCodec, response: bytesCodec },
      kind: "serverStream",
      handler: (async (_req: Buffer, call: ServerWritable<Buffer>, ctx: CallContext) => {
        ctx.signal.addEventListener("abort", () => (state.aborted = true));
        while (state.written < TOTAL) {
          if (clientPaused) state.writtenWhilePaused++;
          state.written++;
          if (!call.write(MESSAGE)) {
            state.waitingInDrain = true;
            await call.drain();
            state.waitingInDrain = false;
          } else if (state.written % 8 === 0) {
            // A watch writes per apply batch, not in one loop: the pipe never backs up, so only write()'s answer can stop it.
            await new Promise((r) => setImmediate(r));
          }
        }
      }) as RegisteredMethod["handler"],
    };
    const link = new FrontEndLink(coreSocket, {
      method: () => method,
      http: () => undefined,
      observer: undefined,
      maxSendMessageBytes: 2 ** 31 - 1,
      onListening: () => {},
      onClosed: () => {},
    });
    const received: Frame[] = [];
    const front = new FramePipe(frontSocket, { frame: (f) => received.push(f), closed: () => {} });
    front.send(FrameKind.Call, 7, ["/t.S/Watch", ["token", "t"], "127.0.0.1:1", "", 0, Buffer.from("go")]);
    // The core writes, the front end receives, then says its client is backed up.
    const responses = () => received.filter((f) => f.kind === FrameKind.Response).length;
    while (responses() === 0) await turns(1);
    front.send(FrameKind.WritePause, 7, []);
    front.flush();
    // A few turns for the pause to cross the loopback socket, then the handler must be waiting.
    await turns(20);
    for (let i = 0; i < 5000 && !state.waitingInDrain; i++) await turns(1);
    expect(state.waitingInDrain, "the handler waits in drain() once the client is paused").toBe(true);
    clientPaused = true;
    // Paused: however many turns pass, the handler stays in drain() and the pipe carries nothing new.
    const writtenAtPause = state.written;
    await turns(50);
    await new Promise((r) => setTimeout(r, 100));
    expect(state.waitingInDrain).toBe(true);
    expect(state.written).toBe(writtenAtPause);
    expect(state.written).toBeLessThan(TOTAL);
    // What the core wrote ahead of the pause is bounded by a turn's batch (plus the socket's buffers), not by TOTAL.
    expect(state.written * MESSAGE.length).toBeLessThan(16 * BATCH_BYTES_HIGH);
    await turns(5);
    expect(responses()).toBe(state.written);

    clientPaused = false;
    front.send(FrameKind.WriteResume, 7, []);
    while (!received.some((f) => f.kind === FrameKind.Status)) await turns(1);
    expect(responses()).toBe(TOTAL);
    const status = received.find((f) => f.kind === FrameKind.Status)!;
    expect(status.values.slice(0, 2)).toEqual([0, ""]);
    expect(state.writtenWhilePaused).toBe(0);
    expect(link.inFlight).toBe(0);
  });

  it("the front end's Cancel aborts the handler's signal and ends the call in the core", async () => {
    const [coreSocket, frontSocket] = await socketPair();
    let aborted: unknown;
    const method: RegisteredMethod = {
      descriptor: { path: "/t.S/Wait", service: "t.S", name: "Wait", requestStream: false, responseStream: false, request: bytesCodec, response: bytesCodec },
      kind: "unary",
      handler: ((_req: Buffer, ctx: CallContext) =>
        new Promise<Buffer>((resolve) => {
          ctx.signal.addEventListener("abort", () => {
            aborted = ctx.signal.reason;
            resolve(Buffer.from("late"));
          });
        })) as RegisteredMethod["handler"],
    };
    const link = new FrontEndLink(coreSocket, { method: () => method, http: () => undefined, observer: undefined, maxSendMessageBytes: 100, onListening: () => {}, onClosed: () => {} });
    const received: Frame[] = [];
    const front = new FramePipe(frontSocket, { frame: (f) => received.push(f), closed: () => {} });
    front.send(FrameKind.Call, 9, ["/t.S/Wait", [], "127.0.0.1:1", "", 0, Buffer.from("x")]);
    while (link.inFlight === 0) await turns(1);
    front.send(FrameKind.Cancel, 9, [4]);
    while (aborted === undefined) await turns(1);
    expect(String(aborted)).toMatch(/deadline exceeded/);
    expect(link.inFlight).toBe(0);
    await turns(10);
    // The late answer of a cancelled call is not sent.
    expect(received.filter((f) => f.id === 9)).toEqual([]);
  });
});
