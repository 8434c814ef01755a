/**
 * Logging: pino, shaped like etcd 3.5's zap JSON lines so log tooling reads both alike:
 *
 *   {"level":"info","ts":"2024-05-01T10:00:00.000Z","caller":"rafthttp","msg":"peer became active","peer-id":"..."}
 *
 * - `level` is the name, not pino's number; `ts` is an ISO-8601 time; no pid/hostname.
 * - `caller` names the component (zap puts file:line there; a component is what a reader needs).
 * - etcd's "panic" level maps to pino's "fatal" (pino has no panic level).
 * Field names in log calls follow etcd's kebab-case ("peer-id", "local-member-id").
 */
import { pino, type DestinationStream, type Logger } from "pino";
import type { LogLevel } from "./config.js";
import { capnslogDestination } from "./log_capnslog.js";

export type { Logger } from "pino";

export interface LoggerOptions {
  /** --log-level; default "info". */
  level?: LogLevel;
  /**
   * Where lines go. Default: stderr, as etcd's zap logger writes to stderr. Tests pass a stream
   * to capture lines.
   */
  destination?: DestinationStream;
  /**
   * --log-outputs, used when no destination is given: "default"/"stderr" (fd 2, etcd's default),
   * "stdout" (fd 1), or file paths (appended). Several outputs each get every line.
   */
  outputs?: readonly string[];
  /** Extra fields on every line (e.g. {"member-name": "n1"}). */
  base?: Record<string, string | number>;
  /** --logger: "zap" (JSON lines, the default) or "capnslog" (etcd 3.4's text lines, log_capnslog.ts). */
  format?: "zap" | "capnslog";
}

function toPinoLevel(level: LogLevel): pino.Level {
  return level === "panic" ? "fatal" : level;
}

/** The process's root logger. */
export function createLogger(options: LoggerOptions = {}): Logger {
  const destination = options.destination ?? outputsDestination(options.outputs ?? ["default"]);
  return pino(
    {
      level: toPinoLevel(options.level ?? "info"),
      messageKey: "msg",
      base: options.base ?? null,
      timestamp: () => `,"ts":"${new Date().toISOString()}"`,
      formatters: {
        level: (label) => ({ level: label }),
      },
    },
    options.format === "capnslog" ? capnslogDestination(destination) : destination,
  );
}

function outputsDestination(outputs: readonly string[]): DestinationStream {
  const streams = outputs.map((o): DestinationStream => {
    if (o === "default" || o === "stderr") return pino.destination({ fd: 2, sync: true });
    if (o === "stdout") return pino.destination({ fd: 1, sync: true });
    return pino.destination({ dest: o, sync: true, append: true, mkdir: true });
  });
  if (streams.length === 1) return streams[0]!;
  return pino.multistream(streams.map((stream) => ({ stream, level: "trace" as const })));
}

/** A logger for one component: every line carries `"caller":"<component>"`. */
export function componentLogger(root: Logger, component: string): Logger {
  return root.child({ caller: component });
}

/** A logger that drops everything (unit tests of components that require one). */
export function silentLogger(): Logger {
  return pino({ level: "silent" });
}
