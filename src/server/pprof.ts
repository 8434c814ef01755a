/**
 * --enable-pprof: etcd serves Go's net/http/pprof under /debug/pprof/ on the client port. A Go
 * profile means nothing to a Node process, so the same paths serve what Node's profilers read,
 * taken through node:inspector in this process:
 *
 *   /debug/pprof/profile?seconds=N  a CPU profile of the next N seconds (default 30, as Go's),
 *                                   V8's .cpuprofile JSON: open it in Chrome DevTools
 *                                   (Performance tab) or speedscope
 *   /debug/pprof/heap               a heap snapshot (.heapsnapshot: DevTools' Memory tab); it
 *                                   stops the member for as long as it takes (about a second per
 *                                   100 MB of heap)
 *   /debug/pprof/allocs?seconds=N   what was allocated in the next N seconds (default 30), freed
 *                                   or not, by call stack: V8's sampling heap profiler with the
 *                                   objects the collector took back kept in, a .heapprofile
 *                                   (DevTools' Memory tab, speedscope). Go's allocs is likewise a
 *                                   sampling of all allocations, but since the process started;
 *                                   V8 samples only while asked, hence the seconds
 *   /debug/pprof/cmdline            the command line, NUL-separated, as Go's
 *   /debug/pprof/                   an index of the above
 *
 * Every other Go profile (goroutine, block, mutex, threadcreate, symbol, trace) answers 501 with a
 * text that says why, rather than a silent 404. One CPU profile runs at a time, and one allocation
 * profile; a second request gets Go's 500 "... already in use".
 */
import { Session } from "node:inspector";
import type { HttpResponse } from "../grpc/index.js";
import { goHttpError } from "./health.js";

export const PPROF_PREFIX = "/debug/pprof/";
/** Go's default duration of /debug/pprof/profile. */
const DEFAULT_PROFILE_SECONDS = 30;
/** A bound on one CPU profile (Go bounds it by the server's write timeout). */
const MAX_PROFILE_SECONDS = 600;
/**
 * Bytes between two samples of the allocation profile: V8's default (Go's MemProfileRate is 512
 * KiB, but a member allocates mostly small short-lived objects, which so coarse a rate misses).
 */
const ALLOCS_SAMPLING_BYTES = 32 * 1024;

const GO_ONLY = new Set(["goroutine", "block", "mutex", "threadcreate", "symbol", "trace"]);

const INDEX = `etcetera /debug/pprof/ (Node.js profiles, not Go's)

profile?seconds=N  CPU profile of the next N seconds (default 30): a .cpuprofile for Chrome DevTools or speedscope
heap               heap snapshot: a .heapsnapshot for Chrome DevTools' Memory tab (pauses the member while taken)
allocs?seconds=N   what was allocated in the next N seconds (default 30), collected or not: a .heapprofile for DevTools or speedscope
cmdline            the command line, NUL-separated

goroutine, block, mutex, threadcreate, symbol and trace are Go runtime profiles: not available here (501).
`;

function post<T>(session: Session, method: string, params?: object): Promise<T> {
  return new Promise((resolve, reject) => {
    session.post(method, params ?? {}, (err, result) => (err ? reject(err) : resolve(result as T)));
  });
}

function attachment(body: string, filename: string): HttpResponse {
  return {
    status: 200,
    headers: { "content-type": "application/octet-stream", "content-disposition": `attachment; filename="${filename}"`, "x-content-type-options": "nosniff" },
    body,
  };
}

export class Pprof {
  /** The kinds of profile being taken: one of each at a time. */
  private readonly running = new Set<"cpu" | "allocs">();

  /** Answers a /debug/pprof/ path (the caller checked the prefix). */
  async serve(url: string, signal: AbortSignal): Promise<HttpResponse> {
    const u = new URL(url, "http://pprof");
    const name = u.pathname.slice(PPROF_PREFIX.length);
    switch (name) {
      case "":
        return { status: 200, headers: { "content-type": "text/plain; charset=utf-8" }, body: INDEX };
      case "cmdline":
        return { status: 200, headers: { "content-type": "text/plain; charset=utf-8", "x-content-type-options": "nosniff" }, body: process.argv.join("\x00") };
      case "profile":
        return this.cpuProfile(u.searchParams.get("seconds"), signal);
      case "heap":
        return attachment(await heapSnapshot(), "heap.heapsnapshot");
      case "allocs":
        return this.allocsProfile(u.searchParams.get("seconds"), signal);
      default:
        if (GO_ONLY.has(name)) return goHttpError(501, `${name} is a Go runtime profile; etcetera runs on Node.js and serves /debug/pprof/profile (CPU), /debug/pprof/heap and /debug/pprof/allocs instead`);
        return goHttpError(404, "Unknown profile");
    }
  }

  private cpuProfile(secondsParam: string | null, signal: AbortSignal): Promise<HttpResponse> {
    return this.forSeconds(secondsParam, signal, "cpu", async (session, elapsed) => {
      await post(session, "Profiler.enable");
      await post(session, "Profiler.start");
      await elapsed();
      const { profile } = await post<{ profile: unknown }>(session, "Profiler.stop");
      return attachment(JSON.stringify(profile), "profile.cpuprofile");
    });
  }

  private allocsProfile(secondsParam: string | null, signal: AbortSignal): Promise<HttpResponse> {
    return this.forSeconds(secondsParam, signal, "allocs", async (session, elapsed) => {
      await post(session, "HeapProfiler.enable");
      // Without the collected objects a sampling heap profile shows only what is still alive at
      // its end: a member's per-request garbage, which is what the collector's time goes to, would be missing.
      await post(session, "HeapProfiler.startSampling", {
        samplingInterval: ALLOCS_SAMPLING_BYTES,
        includeObjectsCollectedByMajorGC: true,
        includeObjectsCollectedByMinorGC: true,
      });
      await elapsed();
      const { profile } = await post<{ profile: unknown }>(session, "HeapProfiler.stopSampling");
      return attachment(JSON.stringify(profile), "allocs.heapprofile");
    });
  }

  /**
   * Runs `take` in an inspector session of its own, one of each kind at a time, with `elapsed`
   * resolving after the seconds asked for (or when the client goes away).
   */
  private async forSeconds(
    secondsParam: string | null,
    signal: AbortSignal,
    kind: "cpu" | "allocs",
    take: (session: Session, elapsed: () => Promise<void>) => Promise<HttpResponse>,
  ): Promise<HttpResponse> {
    const seconds = secondsParam === null || secondsParam === "" ? DEFAULT_PROFILE_SECONDS : Number(secondsParam);
    if (!Number.isInteger(seconds) || seconds <= 0 || seconds > MAX_PROFILE_SECONDS) {
      return goHttpError(400, `Bad Request: seconds must be an integer in 1..${MAX_PROFILE_SECONDS}, got ${JSON.stringify(secondsParam)}`);
    }
    if (this.running.has(kind)) {
      return goHttpError(500, kind === "cpu" ? "Could not enable CPU profiling: cpu profiling already in use" : "Could not enable allocation profiling: allocation profiling already in use");
    }
    this.running.add(kind);
    const session = new Session();
    session.connect();
    const elapsed = (): Promise<void> =>
      new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, seconds * 1000);
        signal.addEventListener("abort", () => (clearTimeout(timer), resolve()), { once: true });
      });
    try {
      return await take(session, elapsed);
    } finally {
      session.disconnect();
      this.running.delete(kind);
    }
  }
}

async function heapSnapshot(): Promise<string> {
  const session = new Session();
  session.connect();
  const chunks: string[] = [];
  session.on("HeapProfiler.addHeapSnapshotChunk", (m: { params: { chunk: string } }) => chunks.push(m.params.chunk));
  try {
    await post(session, "HeapProfiler.takeHeapSnapshot", { reportProgress: false });
    return chunks.join("");
  } finally {
    session.disconnect();
  }
}
