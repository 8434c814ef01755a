/**
 * Plain HTTP clients of the JSON gateway for the e2e suites: node's http (status, headers,
 * trailers, body) and curl as a user runs it, plus the normalizer that leaves out only what two
 * fresh clusters cannot share (member and cluster ids).
 */
import { execFile } from "node:child_process";
import http from "node:http";

export interface HttpAnswer {
  status: number;
  headers: http.IncomingHttpHeaders;
  trailers: NodeJS.Dict<string>;
  body: string;
}

/** One request; `body` is sent whole (a string) or in parts with pauses between them. */
export function request(
  endpoint: string,
  path: string,
  body: string | string[] = "",
  options: { method?: string; headers?: Record<string, string>; pauseMs?: number } = {},
): Promise<HttpAnswer> {
  const [host, port] = endpoint.split(":");
  return new Promise((resolve, reject) => {
    const req = http.request({ host, port: Number(port), path, method: options.method ?? "POST", headers: options.headers, agent: false }, (res) => {
      const parts: Buffer[] = [];
      res.on("data", (c: Buffer) => parts.push(c));
      res.on("end", () =>
        resolve({ status: res.statusCode ?? 0, headers: res.headers, trailers: res.trailers, body: Buffer.concat(parts).toString() }),
      );
      res.on("error", reject);
    });
    req.on("error", reject);
    if (typeof body === "string") {
      req.end(body);
      return;
    }
    void (async () => {
      for (const part of body) {
        req.write(part);
        await new Promise((r) => setTimeout(r, options.pauseMs ?? 50));
      }
      req.end();
    })();
  });
}

/** POSTs JSON and parses the answer (throws with the body when it is not JSON). */
export async function post(endpoint: string, path: string, body: unknown, headers?: Record<string, string>): Promise<{ status: number; json: JsonObject; answer: HttpAnswer }> {
  const answer = await request(endpoint, path, typeof body === "string" ? body : JSON.stringify(body), { headers });
  let json: JsonObject;
  try {
    json = JSON.parse(answer.body) as JsonObject;
  } catch {
    throw new Error(`${path}: status ${answer.status}, body not JSON: ${answer.body}`);
  }
  return { status: answer.status, json, answer };
}

export type JsonObject = Record<string, unknown>;

/** An open streaming response: its head, its newline-delimited chunks as they come, and a way out. */
export interface OpenStream {
  status: number;
  headers: http.IncomingHttpHeaders;
  /** Resolves with the next chunk (a parsed line), or rejects after `timeoutMs`. */
  next(timeoutMs?: number): Promise<JsonObject>;
  /** Resolves true if no chunk comes within `ms`. */
  quiet(ms: number): Promise<boolean>;
  /** Resolves when the response ends. */
  ended: Promise<void>;
  close(): void;
}

/**
 * A streaming POST: the body parts are written and the request body ended (etcd's gateway
 * answers a watch once its request body is complete), then the response is read as it comes.
 */
export function openStream(endpoint: string, path: string, bodyParts: string[], headers?: Record<string, string>): Promise<OpenStream> {
  const [host, port] = endpoint.split(":");
  return new Promise((resolve, reject) => {
    const req = http.request({ host, port: Number(port), path, method: "POST", headers, agent: false }, (res) => {
      const lines: JsonObject[] = [];
      const waiters: Array<(v: JsonObject) => void> = [];
      let buf = "";
      let endResolve!: () => void;
      const ended = new Promise<void>((r) => (endResolve = r));
      res.on("data", (c: Buffer) => {
        buf += c.toString();
        let nl: number;
        while ((nl = buf.indexOf("\n")) >= 0) {
          const line = buf.slice(0, nl);
          buf = buf.slice(nl + 1);
          if (line.trim() === "") continue;
          const obj = JSON.parse(line) as JsonObject;
          const w = waiters.shift();
          if (w) w(obj);
          else lines.push(obj);
        }
      });
      res.on("end", () => endResolve());
      res.on("close", () => endResolve());
      resolve({
        status: res.statusCode ?? 0,
        headers: res.headers,
        next: (timeoutMs = 10_000) => {
          const l = lines.shift();
          if (l) return Promise.resolve(l);
          return new Promise((res2, rej2) => {
            const t = setTimeout(() => rej2(new Error(`no chunk within ${timeoutMs} ms`)), timeoutMs);
            waiters.push((v) => {
              clearTimeout(t);
              res2(v);
            });
          });
        },
        quiet: async (ms) => {
          await new Promise((r) => setTimeout(r, ms));
          return lines.length === 0;
        },
        ended,
        close: () => {
          req.destroy();
          res.destroy();
        },
      });
    });
    req.on("error", reject);
    for (const p of bodyParts) req.write(p);
    req.end();
  });
}

/** Runs curl as a user would: `curl -s -X POST <url> -d <body>`, returning stdout. */
export function curl(args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile("curl", ["-s", ...args], { timeout: 20_000 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`curl ${args.join(" ")}: ${err.message} ${stderr}`));
      else resolve(stdout);
    });
  });
}

const IDS = new Set(["cluster_id", "member_id", "leader", "ID"]);

/**
 * Replaces member and cluster ids (they differ between any two clusters) with "<id>"; with
 * `keepIds` a key such as "ID" of a lease is left as is. Everything else stays to be compared.
 */
export function normalizeIds(v: unknown, keep: ReadonlySet<string> = new Set()): unknown {
  if (Array.isArray(v)) return v.map((x) => normalizeIds(x, keep));
  if (v === null || typeof v !== "object") return v;
  const out: JsonObject = {};
  for (const [k, x] of Object.entries(v as JsonObject)) {
    out[k] = IDS.has(k) && !keep.has(k) && typeof x === "string" ? "<id>" : normalizeIds(x, keep);
  }
  return out;
}

export const b64 = (s: string): string => Buffer.from(s).toString("base64");
