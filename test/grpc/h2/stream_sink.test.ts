/**
 * H2Stream's direct sink (the gRPC call's way to take a stream's events without listeners): what
 * arrived before the sink was attached is delivered in order on attach, every chunk is reported
 * consumed (the flow-control window is granted back), the end, the trailers request and the close
 * reach the sink, and a 'close' listener (a writer waiting on the stream) still hears the close.
 * The connection side is a recording fake: this is a unit test of stream.ts alone.
 */
import type { Socket } from "node:net";
import { describe, expect, it } from "vitest";
import { H2Stream, type StreamOwner, type StreamSink } from "../../../src/grpc/h2/stream.js";

function fakeOwner(): StreamOwner & { log: string[] } {
  const log: string[] = [];
  return {
    log,
    socket: {} as Socket,
    sendHeaders: (_s, _h, endStream) => void log.push(`headers end=${endStream}`),
    sendData: (_s, data, endStream) => void log.push(`data ${data.length} end=${endStream}`),
    sendReset: (s, code) => {
      log.push(`reset ${code}`);
      s.closeNow();
    },
    finished: (s) => {
      log.push("finished");
      s.closeNow();
    },
    consumed: (_s, bytes) => void log.push(`consumed ${bytes}`),
    backedUp: () => false,
  };
}

function recordingSink(): StreamSink & { events: string[] } {
  const events: string[] = [];
  return {
    events,
    onData: (chunk) => void events.push(`data ${chunk.toString()}`),
    onReadEnd: () => void events.push("end"),
    onClose: () => void events.push("close"),
    onWantTrailers: () => void events.push("wantTrailers"),
  };
}

const tick = () => new Promise<void>((r) => process.nextTick(r));

describe("H2Stream sink", () => {
  it("delivers what arrived before attach, in order, then the end; each chunk is consumed", () => {
    const owner = fakeOwner();
    const s = new H2Stream(owner, 1, 65535, 65535);
    s.receiveData(Buffer.from("a"));
    s.receiveData(Buffer.from("bc"));
    s.receiveEnd();
    expect(owner.log).toEqual([]); // held: nobody consumes yet
    const sink = recordingSink();
    s.attach(sink);
    expect(sink.events).toEqual(["data a", "data bc", "end"]);
    expect(owner.log).toEqual(["consumed 1", "consumed 2"]);
    s.receiveData(Buffer.from("late")); // after the end: not a valid frame, but never re-delivers the end
    expect(sink.events.filter((e) => e === "end")).toHaveLength(1);
  });

  it("takes the events instead of listeners; a 'close' listener still hears the close", async () => {
    const owner = fakeOwner();
    const s = new H2Stream(owner, 3, 65535, 65535);
    const sink = recordingSink();
    const heard: string[] = [];
    s.attach(sink);
    s.on("close", () => heard.push("close"));
    s.receiveData(Buffer.from("x"));
    s.receiveEnd();
    s.respond({ ":status": 200 }, { waitForTrailers: true });
    s.end(Buffer.from("body"));
    expect(sink.events).toEqual(["data x", "end", "wantTrailers"]);
    // The sink did not send trailers: end() sends empty ones itself, and the stream finishes.
    expect(owner.log).toEqual(["consumed 1", "headers end=false", "data 4 end=false", "headers end=true", "finished"]);
    await tick();
    expect(sink.events.at(-1)).toBe("close");
    expect(heard).toEqual(["close"]);
  });

  it("a reset closes the stream once, to the sink", async () => {
    const s = new H2Stream(fakeOwner(), 5, 65535, 65535);
    const sink = recordingSink();
    s.attach(sink);
    s.close(8);
    s.close(8);
    await tick();
    expect(sink.events).toEqual(["close"]);
    expect(s.closed).toBe(true);
  });
});
