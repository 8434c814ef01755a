/**
 * gRPC status codes, the error type handlers throw, and the percent-encoding of
 * `grpc-message` (gRPC over HTTP/2 spec: the message is UTF-8, percent-encoded
 * outside printable ASCII and for '%' itself).
 */

/** gRPC status codes (google.golang.org/grpc/codes). */
export const Status = {
  OK: 0,
  CANCELLED: 1,
  UNKNOWN: 2,
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  NOT_FOUND: 5,
  ALREADY_EXISTS: 6,
  PERMISSION_DENIED: 7,
  RESOURCE_EXHAUSTED: 8,
  FAILED_PRECONDITION: 9,
  ABORTED: 10,
  OUT_OF_RANGE: 11,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
  DATA_LOSS: 15,
  UNAUTHENTICATED: 16,
} as const;
export type Status = (typeof Status)[keyof typeof Status];

/** Thrown (or passed to `fail`) by handlers to end a call with a status other than OK. */
export class GrpcError extends Error {
  readonly code: Status;
  /** Extra trailers sent with the status (ASCII values; keys lower-case). */
  readonly trailers: Readonly<Record<string, string>> | undefined;

  constructor(code: Status, message: string, trailers?: Record<string, string>) {
    super(message);
    this.name = "GrpcError";
    this.code = code;
    this.trailers = trailers;
  }
}

/** Maps anything a handler threw to a status: GrpcError keeps its code, the rest is UNKNOWN (as grpc-go does). */
export function toGrpcError(err: unknown): GrpcError {
  if (err instanceof GrpcError) return err;
  if (err instanceof Error) return new GrpcError(Status.UNKNOWN, err.message);
  return new GrpcError(Status.UNKNOWN, String(err));
}

const HEX = "0123456789ABCDEF";

function isUnreserved(c: number): boolean {
  return c >= 0x20 && c <= 0x7e && c !== 0x25;
}

/** Percent-encodes a status message for the `grpc-message` trailer. */
export function encodeGrpcMessage(message: string): string {
  let plain = true;
  for (let i = 0; i < message.length; i++) {
    if (!isUnreserved(message.charCodeAt(i))) {
      plain = false;
      break;
    }
  }
  if (plain) return message;
  const bytes = Buffer.from(message, "utf8");
  let out = "";
  for (const b of bytes) {
    out += isUnreserved(b) ? String.fromCharCode(b) : "%" + HEX[b >> 4] + HEX[b & 15];
  }
  return out;
}

/** Decodes a `grpc-message` value; malformed escapes are kept literally, as the spec asks. */
export function decodeGrpcMessage(value: string): string {
  if (!value.includes("%")) return value;
  const bytes: number[] = [];
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    if (c === 0x25 && i + 2 < value.length && /^[0-9A-Fa-f]{2}$/.test(value.slice(i + 1, i + 3))) {
      bytes.push(parseInt(value.slice(i + 1, i + 3), 16));
      i += 2;
    } else {
      bytes.push(c & 0xff);
    }
  }
  return Buffer.from(bytes).toString("utf8");
}
