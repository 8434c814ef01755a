/** readWalMetadata reads only a segment's header: the ids of the newest segment, however long it is. */
import fs from "node:fs";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { readWalMetadata } from "../../src/wal/metadata.js";
import { WAL } from "../../src/wal/wal.js";
import { makeEntries, makeTmpDir, removeDir, walFiles } from "./helpers.js";

let root: string;
let dir: string;
beforeEach(() => {
  root = makeTmpDir("wal-metadata");
  dir = path.join(root, "wal");
});
afterEach(() => removeDir(root));

describe("readWalMetadata", () => {
  it("returns the ids from the newest segment's header, past many segments and records", async () => {
    const wal = await WAL.create(dir, { memberId: 0xfedcba9876543210n, clusterId: 0x1234n }, { segmentSizeBytes: 64 * 1024 });
    for (let i = 0; i < 40; i++) await wal.save({ term: 1, vote: 1n, commit: i * 50 }, makeEntries(i * 50 + 1, i * 50 + 50, 1, 100));
    await wal.close();
    expect(walFiles(dir).length).toBeGreaterThan(2);
    expect(await readWalMetadata(dir)).toEqual({ memberId: 0xfedcba9876543210n, clusterId: 0x1234n });
  });

  it("is undefined without a WAL, and refuses a newest segment whose header lost its metadata", async () => {
    expect(await readWalMetadata(path.join(root, "none"))).toBeUndefined();
    const wal = await WAL.create(dir, { memberId: 5n, clusterId: 6n }, { segmentSizeBytes: 64 * 1024 });
    await wal.save({ term: 1, vote: 1n, commit: 0 }, makeEntries(1, 10, 1));
    await wal.close();
    const file = path.join(dir, walFiles(dir).at(-1)!);
    const buf = fs.readFileSync(file);
    buf[24] ^= 0xff; // inside the metadata record (after the 20-byte crc record): its CRC fails
    fs.writeFileSync(file, buf);
    await expect(readWalMetadata(dir)).rejects.toThrow(`${file}: no metadata record in the segment header`);
  });
});
