/**
 * The HPACK decoder and literal encoder behind the authority rewriting,
 * checked against RFC 7541's worked examples (Appendix C) and against hpack.js,
 * an independent implementation, on random header lists. Random runs print
 * their seed; replay with SEED=<n>.
 */

import fc from "fast-check";
import hpack, { type HpackHeader } from "hpack.js";
import { describe, expect, it } from "vitest";
import { isValidAuthority, repairAuthority } from "../../../src/grpc/h2/authority.js";
import { encodeLiteralBlock, type HeaderField, HpackDecoder, HpackError, STATIC_TABLE } from "../../../src/grpc/h2/hpack.js";
import { HUFFMAN_CODES, huffmanDecode } from "../../../src/grpc/h2/hpack-huffman.js";
import { seedFor } from "../harness.js";

const SEED = seedFor("hpack");

const hex = (s: string): Buffer => Buffer.from(s.replace(/\s+/g, ""), "hex");
const pairs = (fields: readonly HeaderField[]): [string, string][] => fields.map((f) => [f.name, f.value]);

/** A dynamic table size update (RFC 7541 6.3), which hpack.js cannot emit for a smaller size. */
function sizeUpdate(size: number): Buffer {
  if (size < 31) return Buffer.from([0x20 | size]);
  const out = [0x3f];
  let rest = size - 31;
  while (rest >= 128) {
    out.push((rest % 128) | 0x80);
    rest = Math.floor(rest / 128);
  }
  out.push(rest);
  return Buffer.from(out);
}

function compress(compressor: ReturnType<typeof hpack.compressor.create>, headers: HpackHeader[]): Buffer {
  compressor.write(headers);
  return compressor.read() ?? Buffer.alloc(0);
}

function oracleDecode(decompressor: ReturnType<typeof hpack.decompressor.create>, block: Buffer): [string, string][] {
  decompressor.write(block);
  decompressor.execute();
  const out: [string, string][] = [];
  for (let h = decompressor.read(); h !== null; h = decompressor.read()) out.push([h.name, h.value]);
  return out;
}

/** Huffman-encodes with our code table (the test's own encoder, to craft strings). */
function huffmanEncode(text: string, padBits?: { bits: number; value: number }): Buffer {
  let bits = "";
  for (const c of Buffer.from(text, "latin1")) bits += HUFFMAN_CODES[c]!.code.toString(2).padStart(HUFFMAN_CODES[c]!.bits, "0");
  if (padBits) bits += padBits.value.toString(2).padStart(padBits.bits, "0");
  else bits += "1".repeat((8 - (bits.length % 8)) % 8);
  const out = Buffer.alloc(Math.ceil(bits.length / 8));
  for (let i = 0; i < out.length; i++) out[i] = parseInt(bits.slice(8 * i, 8 * i + 8).padEnd(8, "0"), 2);
  return out;
}

describe("HPACK Huffman code", () => {
  it("every code word equals hpack.js's table (RFC 7541 Appendix B)", () => {
    const oracle = hpack.huffman.encode;
    expect(oracle.length).toBe(257);
    for (let s = 0; s < 257; s++) expect(HUFFMAN_CODES[s], `symbol ${s}`).toEqual({ bits: oracle[s]![0], code: oracle[s]![1] });
  });

  it("decodes every octet value, and refuses EOS, long padding and zero padding", () => {
    const all = Buffer.from(Array.from({ length: 256 }, (_, i) => i)).toString("latin1");
    const coded = huffmanEncode(all);
    expect(huffmanDecode(coded, 0, coded.length)).toBe(all);
    expect(huffmanDecode(hex("f1e3c2e5f23a6ba0ab90f4ff"), 0, 12)).toBe("www.example.com");
    // EOS (30 ones) inside the string.
    expect(() => huffmanDecode(hex("ffffffff"), 0, 4)).toThrow(HpackError);
    // "a" (00011) then 8 bits of padding ones: padding longer than 7 bits.
    expect(() => huffmanDecode(huffmanEncode("a", { bits: 11, value: 0x7ff }), 0, 2)).toThrow(/longer than 7/);
    // "a" then 3 zero bits: padding that is not EOS's prefix.
    expect(() => huffmanDecode(huffmanEncode("a", { bits: 3, value: 0 }), 0, 1)).toThrow(/prefix of EOS/);
  });
});

describe("HPACK decoder", () => {
  it("has RFC 7541's static table", () => {
    const oracle = hpack["static-table"].table;
    expect(STATIC_TABLE.map(([n, v]) => ({ name: n, value: v }))).toEqual(oracle.map((e) => ({ name: e.name, value: e.value })));
  });

  const requests: [string, string][][] = [
    [[":method", "GET"], [":scheme", "http"], [":path", "/"], [":authority", "www.example.com"]],
    [[":method", "GET"], [":scheme", "http"], [":path", "/"], [":authority", "www.example.com"], ["cache-control", "no-cache"]],
    [[":method", "GET"], [":scheme", "https"], [":path", "/index.html"], [":authority", "www.example.com"], ["custom-key", "custom-value"]],
  ];
  const tableSizes = [57, 110, 164];

  it("RFC 7541 C.3: requests without Huffman coding, one dynamic table across blocks", () => {
    const decoder = new HpackDecoder();
    const blocks = [
      "828684410f7777772e6578616d706c652e636f6d",
      "828684be58086e6f2d6361636865",
      "828785bf400a637573746f6d2d6b65790c637573746f6d2d76616c7565",
    ];
    blocks.forEach((block, i) => {
      expect(pairs(decoder.decode(hex(block)))).toEqual(requests[i]);
      expect(decoder.table.size).toBe(tableSizes[i]);
    });
  });

  it("RFC 7541 C.4: the same requests Huffman-coded", () => {
    const decoder = new HpackDecoder();
    const blocks = ["828684418cf1e3c2e5f23a6ba0ab90f4ff", "828684be5886a8eb10649cbf", "828785bf408825a849e95ba97d7f8925a849e95bb8e8b4bf"];
    blocks.forEach((block, i) => {
      expect(pairs(decoder.decode(hex(block)))).toEqual(requests[i]);
      expect(decoder.table.size).toBe(tableSizes[i]);
    });
  });

  it("RFC 7541 C.6: responses with eviction in a 256-octet table", () => {
    const decoder = new HpackDecoder({ maxTableSize: 256 });
    const first = decoder.decode(
      hex(
        "488264025885aec3771a4b6196d07abe941054d444a8200595040b8166e082a62d1bff6e919d29ad171863c78f0b97c8e9ae82ae43d3",
      ),
    );
    expect(pairs(first)).toEqual([
      [":status", "302"],
      ["cache-control", "private"],
      ["date", "Mon, 21 Oct 2013 20:13:21 GMT"],
      ["location", "https://www.example.com"],
    ]);
    expect(decoder.table).toEqual({ entries: 4, size: 222, maxSize: 256 });
    expect(pairs(decoder.decode(hex("4883640effc1c0bf")))[0]).toEqual([":status", "307"]);
    expect(decoder.table.size).toBe(222);
    const third = decoder.decode(
      hex(
        "88c16196d07abe941054d444a8200595040b8166e084a62d1bffc05a839bd9ab77ad94e7821dd7f2e6c7b335dfdfcd5b3960d5af27087f3672c1ab270fb5291f9587316065c003ed4ee5b1063d5007",
      ),
    );
    expect(pairs(third)).toEqual([
      [":status", "200"],
      ["cache-control", "private"],
      ["date", "Mon, 21 Oct 2013 20:13:22 GMT"],
      ["location", "https://www.example.com"],
      ["content-encoding", "gzip"],
      ["set-cookie", "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1"],
    ]);
    expect(decoder.table).toEqual({ entries: 3, size: 215, maxSize: 256 });
  });

  it("applies table size updates: eviction, limit, position", () => {
    const compressor = hpack.compressor.create({ table: { maxSize: 4096 } });
    const decoder = new HpackDecoder();
    decoder.decode(compress(compressor, [{ name: ":authority", value: "http://127.0.0.1:2379" }, { name: "x-a", value: "1" }]));
    expect(decoder.table.entries).toBe(2);
    // Shrinking to 64 keeps only the newest entry (x-a: 1, 36 octets).
    decoder.decode(sizeUpdate(64));
    expect(decoder.table).toEqual({ entries: 1, size: 36, maxSize: 64 });
    // 0 then 4096 in one block: empties the table, then allows it to grow again.
    decoder.decode(Buffer.concat([sizeUpdate(0), sizeUpdate(4096), hex("4003782d62" + "0132")]));
    expect(decoder.table).toEqual({ entries: 1, size: 36, maxSize: 4096 });
    expect(() => decoder.decode(sizeUpdate(4097))).toThrow(/above the advertised 4096/);
    expect(() => new HpackDecoder().decode(Buffer.concat([hex("82"), sizeUpdate(10)]))).toThrow(/after a header field/);
  });

  it("an entry larger than the table empties it and is not added", () => {
    const decoder = new HpackDecoder({ maxTableSize: 64 });
    decoder.decode(hex("4003782d62" + "0132"));
    expect(decoder.table.entries).toBe(1);
    const big = "v".repeat(40);
    decoder.decode(Buffer.concat([hex("4003782d63"), Buffer.from([big.length]), Buffer.from(big)]));
    expect(decoder.table).toEqual({ entries: 0, size: 0, maxSize: 64 });
  });

  it("a repeated block that left the table as it was is not decoded again, and one that changes the table always is", () => {
    const decoder = new HpackDecoder();
    // x-b: 2 enters the table at 62; "82be" is then :method GET and x-b: 2, indexed only.
    decoder.decode(hex("4003782d620132"));
    const first = decoder.decode(hex("82be"));
    expect(pairs(first)).toEqual([[":method", "GET"], ["x-b", "2"]]);
    // The same bytes (a new buffer) give the same list back, the table untouched.
    expect(decoder.decode(hex("82be"))).toBe(first);
    expect(decoder.table.entries).toBe(1);
    // A block that inserts is decoded every time (its second decode inserts again).
    decoder.decode(hex("4003782d620133"));
    decoder.decode(hex("4003782d620133"));
    expect(decoder.table.entries).toBe(3);
    // The table moved under the repeated bytes: 62 is now x-b: 3, and the block says so.
    expect(pairs(decoder.decode(hex("82be")))).toEqual([[":method", "GET"], ["x-b", "3"]]);
    // A size update empties the table: the repeat is gone with it, and index 62 is refused.
    const kept = decoder.decode(hex("82be"));
    expect(decoder.decode(hex("82be"))).toBe(kept);
    decoder.decode(Buffer.concat([Buffer.from([0x20]), hex("82")]));
    expect(() => decoder.decode(hex("82be"))).toThrow(/beyond the table/);
  });

  it("a failed decode leaves no repeat behind", () => {
    const decoder = new HpackDecoder();
    decoder.decode(hex("4003782d620132"));
    expect(pairs(decoder.decode(hex("be")))).toEqual([["x-b", "2"]]);
    expect(() => decoder.decode(hex("bf"))).toThrow(/beyond the table/);
    expect(pairs(decoder.decode(hex("be")))).toEqual([["x-b", "2"]]);
  });

  it("refuses malformed blocks", () => {
    const bad: [string, RegExp][] = [
      ["80", /index 0/],
      ["be", /beyond the table/],
      ["ff", /truncated integer/],
      ["ffffffffff0f", /integer too large/],
      ["4005", /beyond the block/],
      ["40", /truncated string/],
      ["0003782d6205", /beyond the block/],
    ];
    for (const [block, message] of bad) expect(() => new HpackDecoder().decode(hex(block)), block).toThrow(message);
  });

  it("caps the decoded header list (a small block referencing a large entry many times)", () => {
    const decoder = new HpackDecoder({ maxHeaderListBytes: 64 * 1024 });
    const value = "x".repeat(4000);
    decoder.decode(Buffer.concat([hex("4003782d62"), hex("7fa11e"), Buffer.from(value)]));
    expect(decoder.table.entries).toBe(1);
    expect(() => decoder.decode(Buffer.alloc(100, 0xbe))).toThrow(/header list above/);
  });

  it(`decodes hpack.js output over a shared dynamic table, and the literal encoding round-trips (seed ${SEED})`, () => {
    const octets = fc.uint8Array({ minLength: 0, maxLength: 40 }).map((a) => Buffer.from(a).toString("latin1"));
    const name = fc.oneof(fc.constantFrom(":authority", ":path", "host", "content-type", "user-agent", "te"), fc.stringMatching(/^[a-z][a-z0-9-]{0,15}$/));
    const header = fc.record({
      name,
      value: fc.oneof(octets, fc.constantFrom("http://127.0.0.1:2379", "application/grpc", "")),
      huffman: fc.boolean(),
      incremental: fc.boolean(),
      neverIndex: fc.boolean(),
    });
    fc.assert(
      fc.property(fc.array(fc.array(header, { maxLength: 12 }), { minLength: 1, maxLength: 8 }), (blocks) => {
        const compressor = hpack.compressor.create({ table: { maxSize: 4096 } });
        const decoder = new HpackDecoder();
        const literalOracle = hpack.decompressor.create({ table: { maxSize: 4096 } });
        const mirror = new HpackDecoder();
        for (const headers of blocks) {
          const block = compress(compressor, headers);
          const fields = decoder.decode(block);
          expect(pairs(fields)).toEqual(headers.map((h) => [h.name, h.value]));
          fields.forEach((f, i) => expect(f.neverIndexed).toBe(headers[i]!.neverIndex === true));
          // Re-encoded as literals: both decoders read the same fields and keep an empty table.
          const literal = encodeLiteralBlock(fields);
          expect(oracleDecode(literalOracle, literal)).toEqual(pairs(fields));
          expect(mirror.decode(literal)).toEqual(fields);
          expect(mirror.table.entries).toBe(0);
        }
      }),
      { seed: SEED, numRuns: 150 },
    );
  });

  it("the literal encoder writes long names and values with multi-octet lengths, and a leading size update", () => {
    const fields: HeaderField[] = [
      { name: "x-long", value: "y".repeat(300), neverIndexed: false },
      { name: "authorization", value: "secret", neverIndexed: true },
      { name: ":authority", value: "127.0.0.1:2379", neverIndexed: false },
    ];
    const block = encodeLiteralBlock(fields, 0);
    expect(block[0]).toBe(0x20);
    const decoder = new HpackDecoder();
    expect(decoder.decode(block)).toEqual(fields);
    expect(decoder.table.maxSize).toBe(0);
  });
});

describe("authority repair", () => {
  it("keeps host:port and strips scheme, path and refused characters", () => {
    expect(repairAuthority("http://127.0.0.1:2379")).toBe("127.0.0.1:2379");
    expect(repairAuthority("https://[::1]:2379/")).toBe("[::1]:2379");
    expect(repairAuthority("unix:///var/run/etcd.sock")).toBe("localhost");
    expect(repairAuthority("")).toBe("localhost");
    expect(repairAuthority("my host:1")).toBe("myhost:1");
    expect(repairAuthority("h\u00e9:1?x")).toBe("h:1");
    for (const v of ["http://127.0.0.1:2379", "", "a b", "x/y", "é", "unix:///s"]) expect(isValidAuthority(repairAuthority(v))).toBe(true);
  });
});
