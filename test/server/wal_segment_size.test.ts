import { describe, expect, it } from "vitest";
import { DEFAULT_SEGMENT_SIZE_BYTES } from "../../src/wal/wal.js";
import { WAL_SEGMENT_SIZE_ENV, walSegmentSizeFromEnv } from "../../src/server/wal_segment_size.js";

describe("the raft WAL's segment size from the environment (test-only)", () => {
  it("is the default unless set, the value when set, and refuses what the WAL would not take", () => {
    expect(walSegmentSizeFromEnv({})).toEqual({ bytes: DEFAULT_SEGMENT_SIZE_BYTES, fromEnv: false });
    expect(walSegmentSizeFromEnv({ [WAL_SEGMENT_SIZE_ENV]: "65536" })).toEqual({ bytes: 65536, fromEnv: true });
    expect(() => walSegmentSizeFromEnv({ [WAL_SEGMENT_SIZE_ENV]: "512" })).toThrow(/≥ 1024/);
    expect(() => walSegmentSizeFromEnv({ [WAL_SEGMENT_SIZE_ENV]: "64k" })).toThrow(WAL_SEGMENT_SIZE_ENV);
  });
});
