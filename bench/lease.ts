/**
 * Lessor benchmark: grants/s (persisted to SQLite in batched transactions, as inside the MVCC
 * backend), keep-alives/s, expiry polling + revokes/s, promote time, and memory per lease.
 *
 *   npx tsx bench/lease.ts            # 1,000,000 leases
 *   LEASES=200000 npx tsx bench/lease.ts
 */
import Database from "better-sqlite3";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { Lessor } from "../src/lease/lessor.js";
import type { RangeDeleter } from "../src/lease/types.js";

const N = Number(process.env.LEASES ?? 1_000_000);
const BATCH = 10_000; // the MVCC backend's batch limit: writes per SQLite transaction

setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;

function heapUsed(): number {
  for (let i = 0; i < 3; i++) gc();
  return process.memoryUsage().heapUsed;
}

function rate(count: number, ms: number): string {
  return `${Math.round((count / ms) * 1000).toLocaleString("en-US")}/s`;
}

class Clock {
  ms = 0;
  readonly now = (): number => this.ms;
}

const deleter: RangeDeleter = { deleteKeys() {} };

function openDb(dir: string, name: string): Database.Database {
  const db = new Database(join(dir, name));
  db.pragma("journal_mode = WAL");
  db.pragma("synchronous = OFF");
  return db;
}

/** Runs fn(i) for i in [0, n) in SQLite transactions of BATCH writes; returns elapsed ms. */
function batched(db: Database.Database, n: number, fn: (i: number) => void): number {
  const start = performance.now();
  for (let base = 0; base < n; base += BATCH) {
    db.transaction(() => {
      const end = Math.min(n, base + BATCH);
      for (let i = base; i < end; i++) fn(i);
    })();
  }
  return performance.now() - start;
}

function main(): void {
  const dir = mkdtempSync(join(tmpdir(), "etcetera-bench-lease-"));
  try {
    console.log(`lessor benchmark: ${N.toLocaleString("en-US")} leases, node ${process.version}`);

    // Memory: bare leases held by a leader (each in the expiry queue), then with one key attached.
    {
      const clock = new Clock();
      const db = openDb(dir, "mem.sqlite");
      const base = heapUsed();
      const lessor = new Lessor({ db, now: clock.now, rangeDeleter: deleter });
      lessor.promote(0);
      const grantMs = batched(db, N, (i) => lessor.grant(i + 1, 60));
      const withLeases = heapUsed();
      const keys: Uint8Array[] = [];
      for (let i = 0; i < N; i++) keys.push(Buffer.from(`/registry/pods/default/pod-${i.toString().padStart(8, "0")}`));
      const withKeyBytes = heapUsed();
      for (let i = 0; i < N; i++) lessor.attach(i + 1, keys[i] as Uint8Array);
      const withKeys = heapUsed();
      console.log(`grant (persisted, ${BATCH}/txn):   ${rate(N, grantMs)}`);
      console.log(`memory per lease (leader, no keys): ${Math.round((withLeases - base) / N)} bytes`);
      console.log(`memory per attached key (~36 B key): ${Math.round((withKeys - withKeyBytes) / N)} bytes (excluding the caller's key buffer)`);

      // Keep-alives: renew random leases.
      const renewals = Math.min(N, 1_000_000);
      let x = 12345;
      const start = performance.now();
      for (let i = 0; i < renewals; i++) {
        x = (x * 1103515245 + 12345) % 2 ** 31;
        clock.ms += 0.001;
        lessor.renew((x % N) + 1);
      }
      console.log(`keep-alive (renew):                ${rate(renewals, performance.now() - start)}`);

      // TimeToLive with keys.
      const ttlStart = performance.now();
      const lookups = Math.min(N, 200_000);
      for (let i = 0; i < lookups; i++) lessor.timeToLive((i % N) + 1, { keys: true });
      console.log(`TimeToLive(keys):                  ${rate(lookups, performance.now() - ttlStart)}`);

      // Demote + promote of every lease (leader change), with etcd's spreading.
      lessor.demote();
      const promoteStart = performance.now();
      lessor.promote(1000);
      console.log(`promote of ${N.toLocaleString("en-US")} leases:        ${(performance.now() - promoteStart).toFixed(0)} ms (synchronous)`);

      // Expiry: everything expires; poll in etcd-sized batches and revoke what is handed out.
      clock.ms += 10_000_000;
      const pollStart = performance.now();
      let revoked = 0;
      let polls = 0;
      let maxPollMs = 0;
      for (;;) {
        const t0 = performance.now();
        const ids = lessor.expiredLeases();
        maxPollMs = Math.max(maxPollMs, performance.now() - t0);
        if (ids.length === 0) break;
        polls++;
        db.transaction(() => {
          for (const id of ids) lessor.revoke(id);
        })();
        revoked += ids.length;
      }
      const pollMs = performance.now() - pollStart;
      console.log(`expire+revoke (persisted):          ${rate(revoked, pollMs)} in ${polls} polls, slowest poll ${maxPollMs.toFixed(2)} ms`);
      if (revoked !== N) throw new Error(`expected ${N} revokes, got ${revoked}`);
      db.close();
    }

    // Restart: load N leases from SQLite.
    {
      const db = openDb(dir, "restart.sqlite");
      const clock = new Clock();
      const first = new Lessor({ db, now: clock.now });
      batched(db, N, (i) => first.grant(i + 1, 60));
      db.close();
      const reopened = openDb(dir, "restart.sqlite");
      const start = performance.now();
      const again = new Lessor({ db: reopened, now: clock.now });
      console.log(`restart (load ${again.size.toLocaleString("en-US")} leases):     ${(performance.now() - start).toFixed(0)} ms`);
      reopened.close();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

main();
