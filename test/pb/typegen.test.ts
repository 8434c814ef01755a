import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { ETCD_API_FILES, MEMBER_FILES, PROTO_DIR } from "../../src/pb/protos.js";
import { generateTypes, MEMBER_TYPEGEN, MEMBER_TYPES_COMMAND } from "../../src/pb/typegen.js";

describe("etcd-types.ts", () => {
  it("is up to date with the protos (regenerate: npx tsx src/pb/typegen.ts > src/pb/etcd-types.ts)", () => {
    const committed = readFileSync(fileURLToPath(new URL("../../src/pb/etcd-types.ts", import.meta.url)), "utf8");
    const generated = generateTypes(PROTO_DIR, ETCD_API_FILES, "npx tsx src/pb/typegen.ts > src/pb/etcd-types.ts");
    expect(generated).toBe(committed);
  });
});

describe("member-types.ts", () => {
  it("is up to date with the protos (regenerate: npx tsx src/pb/typegen.ts --member > src/pb/member-types.ts)", () => {
    const committed = readFileSync(fileURLToPath(new URL("../../src/pb/member-types.ts", import.meta.url)), "utf8");
    const generated = generateTypes(PROTO_DIR, MEMBER_FILES, MEMBER_TYPES_COMMAND, MEMBER_TYPEGEN);
    expect(generated).toBe(committed);
  });
});
