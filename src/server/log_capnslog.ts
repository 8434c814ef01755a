/**
 * --logger=capnslog (etcd 3.4's default): the same log records as the zap JSON lines, written in
 * capnslog's text form so tools that grep etcd 3.4's default logs keep working:
 *
 *   2026-12-01 14:05:39.586184 I | rafthttp: peer became active peer-id=0000000000000002
 *
 * local time with microseconds, one letter for the level (capnslog's C E W N I D T: fatal and
 * panic are C), the component (zap's caller here) as capnslog's package, the message, then the
 * record's fields as key=value (capnslog formats them into the message; here they follow it).
 * A record is formatted from the JSON line pino writes, so both loggers carry the same records.
 */
import type { DestinationStream } from "pino";
import { goQuote } from "../grpc/go_quote.js";

const LEVEL_LETTERS: Record<string, string> = { trace: "T", debug: "D", info: "I", warn: "W", error: "E", fatal: "C", panic: "C" };

function pad(n: number, width = 2): string {
  return String(n).padStart(width, "0");
}

/** capnslog's timestamp: "2006-01-02 15:04:05.000000", local time. */
export function capnslogTime(d: Date): string {
  const date = `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`;
  const time = `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}000`;
  return `${date} ${time}`;
}

function fieldText(v: unknown): string {
  if (typeof v === "string") return /[\s"=]/.test(v) || v === "" ? JSON.stringify(v) : v;
  if (typeof v === "bigint") return v.toString(); // JSON.stringify throws on a bigint
  return JSON.stringify(v, (_k, x: unknown) => (typeof x === "bigint" ? x.toString() : x));
}

/**
 * etcd 3.4's capnslog words for a slow request (etcdserver/util.go), the line operators grep:
 * `request "<request>" with result "<response or error:...>" took too long (<took>) to execute`.
 */
function slowRequestText(fields: Record<string, unknown>): string | undefined {
  const { prefix, request, response, error, took } = fields;
  if (typeof request !== "string" || typeof took !== "string") return undefined;
  const result = error !== undefined ? `error:${String(error)}` : String(response ?? "");
  return `${String(prefix ?? "")}request ${goQuote(request)} with result ${goQuote(result)} took too long (${took}) to execute`;
}

/** One zap-shaped JSON record as a capnslog line (with its newline). */
export function capnslogLine(record: Record<string, unknown>): string {
  const { level, ts, caller, msg, ...fields } = record;
  const when = typeof ts === "string" ? new Date(ts) : new Date();
  const letter = LEVEL_LETTERS[String(level)] ?? "I";
  const pkg = typeof caller === "string" ? caller : "etcetera";
  const slow = msg === "apply request took too long" ? slowRequestText(fields) : undefined;
  if (slow !== undefined) return `${capnslogTime(when)} ${letter} | ${pkg}: ${slow}\n`;
  const extra = Object.entries(fields)
    .map(([k, v]) => `${k}=${fieldText(v)}`)
    .join(" ");
  return `${capnslogTime(when)} ${letter} | ${pkg}: ${String(msg ?? "")}${extra === "" ? "" : ` ${extra}`}\n`;
}

/** Rewrites each JSON line pino writes as a capnslog line into `out`. */
export function capnslogDestination(out: DestinationStream): DestinationStream {
  return {
    write(chunk: string): void {
      for (const line of chunk.split("\n")) {
        if (line === "") continue;
        let record: Record<string, unknown>;
        try {
          record = JSON.parse(line) as Record<string, unknown>;
        } catch {
          out.write(`${line}\n`);
          continue;
        }
        out.write(capnslogLine(record));
      }
    },
  };
}
