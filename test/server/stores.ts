/** A member's stores in one temp backend, registered in the server's order, for the server's unit tests. */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach } from "vitest";
import { SimpleTokenProvider } from "../../src/auth/simple_token.js";
import { AuthStore } from "../../src/auth/store.js";
import { Backend } from "../../src/backend/backend.js";
import { Lessor } from "../../src/lease/lessor.js";
import { KvStore } from "../../src/mvcc/kvstore.js";
import { WatchableStore } from "../../src/mvcc/watchable_store.js";
import { Alarms } from "../../src/server/alarms.js";
import { Membership } from "../../src/server/membership.js";

const open: (() => void)[] = [];
afterEach(() => {
  for (const close of open.splice(0).reverse()) close();
});

/** Closed (and the directory removed) after the test. */
export function memberStores() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "member-stores-"));
  const backend = Backend.open(path.join(dir, "db"));
  const lessor = new Lessor({ backend, now: () => 0, minLeaseTtlSec: 1 });
  const kv = KvStore.open({ backend, leases: lessor, compactionSleepMs: 0 });
  lessor.setRangeDeleter(kv);
  const watchable = new WatchableStore(kv);
  const alarms = new Alarms(backend);
  const tokens = new SimpleTokenProvider({ ttlMs: 300_000, now: () => performance.now(), waitApplied: () => Promise.resolve() });
  const auth = new AuthStore({ backend, tokens });
  const membership = new Membership(backend, 0x99n);
  open.push(() => {
    tokens.close();
    watchable.close();
    kv.close();
    backend.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  return { backend, lessor, kv, watchable, alarms, auth, tokens, membership };
}
