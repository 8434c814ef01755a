import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { parseGrpcTimeout } from "../../src/grpc/deadline.js";
import { MessageDeframer, type MessageSink } from "../../src/grpc/framing.js";
import { GrpcError, Status, decodeGrpcMessage, encodeGrpcMessage } from "../../src/grpc/status.js";
import { frame, seedFor } from "./harness.js";

class Collector implements MessageSink {
  messages: Buffer[] = [];
  onFrame(message: Buffer): void {
    this.messages.push(Buffer.from(message));
  }
}

describe("MessageDeframer", () => {
  it("reassembles messages split and coalesced at arbitrary chunk boundaries (property)", () => {
    const seed = seedFor("deframer split");
    fc.assert(
      fc.property(
        fc.array(fc.uint8Array({ maxLength: 200 }), { minLength: 1, maxLength: 8 }),
        fc.array(fc.integer({ min: 1, max: 64 }), { minLength: 1, maxLength: 50 }),
        (messages, cuts) => {
          const wire = Buffer.concat(messages.map((m) => frame(Buffer.from(m))));
          const deframer = new MessageDeframer(1024);
          const sink = new Collector();
          let pos = 0;
          for (let i = 0; pos < wire.length; i++) {
            const n = cuts[i % cuts.length]!;
            deframer.push(wire.subarray(pos, pos + n), sink);
            pos += n;
          }
          expect(sink.messages).toEqual(messages.map((m) => Buffer.from(m)));
          expect(deframer.partial).toBe(false);
        },
      ),
      { seed, numRuns: 300 },
    );
  });

  it("rejects an oversized message from its prefix alone, before any payload arrives", () => {
    const deframer = new MessageDeframer(100);
    const prefix = Buffer.from([0, 0, 0, 0, 101]);
    let error: unknown;
    try {
      deframer.push(prefix, new Collector());
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(GrpcError);
    expect((error as GrpcError).code).toBe(Status.RESOURCE_EXHAUSTED);
    expect((error as GrpcError).message).toBe("grpc: received message larger than max (101 vs. 100)");
  });

  it("checks the limit when the prefix itself is split", () => {
    const deframer = new MessageDeframer(10);
    const sink = new Collector();
    deframer.push(Buffer.from([0, 0]), sink);
    expect(() => deframer.push(Buffer.from([0, 0, 11]), sink)).toThrow(/larger than max \(11 vs. 10\)/);
  });

  it("reports a stream ending inside a message", () => {
    const deframer = new MessageDeframer(100);
    deframer.push(frame(Buffer.from("hello")).subarray(0, 7), new Collector());
    expect(deframer.partial).toBe(true);
  });

  it("accepts empty messages", () => {
    const deframer = new MessageDeframer(100);
    const sink = new Collector();
    deframer.push(Buffer.concat([frame(Buffer.alloc(0)), frame(Buffer.alloc(0))]), sink);
    expect(sink.messages).toEqual([Buffer.alloc(0), Buffer.alloc(0)]);
  });
});

describe("grpc-message percent-encoding", () => {
  it("leaves printable ASCII alone and escapes the rest", () => {
    expect(encodeGrpcMessage("etcdserver: key not found")).toBe("etcdserver: key not found");
    expect(encodeGrpcMessage("100% done\n")).toBe("100%25 done%0A");
    expect(encodeGrpcMessage("clé")).toBe("cl%C3%A9");
  });

  it("round-trips any string (property)", () => {
    const seed = seedFor("grpc-message");
    fc.assert(
      fc.property(fc.string({ unit: "grapheme", maxLength: 40 }), (s) => {
        const enc = encodeGrpcMessage(s);
        expect(/^[\x20-\x7e]*$/.test(enc)).toBe(true);
        expect(decodeGrpcMessage(enc)).toBe(s);
      }),
      { seed, numRuns: 300 },
    );
  });
});

describe("grpc-timeout", () => {
  it("parses every unit, rounding up to whole milliseconds", () => {
    expect(parseGrpcTimeout("1H")).toBe(3_600_000);
    expect(parseGrpcTimeout("2M")).toBe(120_000);
    expect(parseGrpcTimeout("5S")).toBe(5_000);
    expect(parseGrpcTimeout("250m")).toBe(250);
    expect(parseGrpcTimeout("1500u")).toBe(2);
    expect(parseGrpcTimeout("1n")).toBe(1);
    expect(parseGrpcTimeout("0m")).toBe(0);
    expect(parseGrpcTimeout("99999999H")).toBe(2 ** 31 - 1);
  });

  it("rejects malformed values", () => {
    for (const bad of ["", "5", "S", "123456789S", "5s", "5 S", " 5S", "1.5S", "-S", "+S", "--5S"]) expect(parseGrpcTimeout(bad), bad).toBeUndefined();
  });

  it("takes a sign as grpc-go's ParseInt does: a negative timeout is a deadline already past", () => {
    expect(parseGrpcTimeout("-5S")).toBe(0);
    expect(parseGrpcTimeout("+5S")).toBe(5_000);
    expect(parseGrpcTimeout("-0m")).toBe(0);
  });
});
