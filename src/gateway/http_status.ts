/**
 * How etcd's gateway (grpc-gateway v1) turns a gRPC status into HTTP: its code → status table,
 * the error body of a unary call (`{"error","message","code"}`) and the error chunk that ends a
 * stream (`{"error":{"grpc_code","http_code","message","http_status"}}`).
 */

import { STATUS_CODES } from "node:http";
import { Status } from "../grpc/index.js";
import { goJsonString } from "./json_mapping.js";

const HTTP_OF_CODE: Readonly<Record<number, number>> = {
  [Status.OK]: 200,
  [Status.CANCELLED]: 408,
  [Status.UNKNOWN]: 500,
  [Status.INVALID_ARGUMENT]: 400,
  [Status.DEADLINE_EXCEEDED]: 504,
  [Status.NOT_FOUND]: 404,
  [Status.ALREADY_EXISTS]: 409,
  [Status.PERMISSION_DENIED]: 403,
  [Status.UNAUTHENTICATED]: 401,
  [Status.RESOURCE_EXHAUSTED]: 429,
  [Status.FAILED_PRECONDITION]: 412,
  [Status.ABORTED]: 409,
  [Status.OUT_OF_RANGE]: 400,
  [Status.UNIMPLEMENTED]: 501,
  [Status.INTERNAL]: 500,
  [Status.UNAVAILABLE]: 503,
  [Status.DATA_LOSS]: 500,
};

/** grpc-gateway's HTTPStatusFromCode (unknown codes: 500). */
export function httpStatusOf(code: number): number {
  return HTTP_OF_CODE[code] ?? 500;
}

/** Go's http.StatusText. */
export function httpStatusText(status: number): string {
  return STATUS_CODES[status] ?? "";
}

/** The body of a failed unary call (runtime.DefaultHTTPError). */
export function errorBody(code: number, message: string): string {
  const m = goJsonString(message);
  return `{"error":${m},"message":${m},"code":${code}}`;
}

/** The chunk a stream ends with when its call fails (runtime's streamChunk of an error). */
export function streamErrorChunk(code: number, message: string): string {
  const http = httpStatusOf(code);
  const grpcCode = code === 0 ? "" : `"grpc_code":${code},`;
  return `{"error":{${grpcCode}"http_code":${http},"message":${goJsonString(message)},"http_status":${goJsonString(httpStatusText(http))}}}`;
}
