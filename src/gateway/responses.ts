/**
 * The gateway's HTTP answers, shaped as grpc-gateway writes them: a call's JSON with the gRPC
 * response headers it forwards, a failed call's error body with its status as trailers, a
 * request refused before any call, and the mux's plain-text 404/405.
 */

import type { GrpcError, HttpResponse } from "../grpc/index.js";
import { errorBody, httpStatusOf } from "./http_status.js";

export const JSON_HEADERS = { "content-type": "application/json" };
/** What grpc-gateway forwards of the gRPC response's headers (its only header is the content type). */
export const METADATA_HEADERS = { ...JSON_HEADERS, "grpc-metadata-content-type": "application/grpc" };
/** A failed call's gRPC status comes as trailers-only: grpc-gateway forwards them as HTTP trailers. */
const ERROR_TRAILERS = { "Grpc-Trailer-Content-Type": "application/grpc" };

/** The gateway's answers that are not gRPC calls, as grpc-gateway's mux writes them. */
export function plain(status: number, text: string): HttpResponse {
  const body = `${text}\n`;
  return {
    status,
    headers: { "content-type": "text/plain; charset=utf-8", "x-content-type-options": "nosniff", "content-length": String(body.length) },
    body,
  };
}

/** A JSON answer with its length (Go sets Content-Length on a body written at once). */
export function jsonResponse(status: number, headers: Record<string, string>, body: string): HttpResponse {
  return { status, headers: { ...headers, "content-length": String(Buffer.byteLength(body)) }, body };
}

/** The error answer of a call that was made (its status arrives as trailers-only). */
export function callErrorResponse(err: GrpcError): HttpResponse {
  return {
    status: httpStatusOf(err.code),
    headers: { ...JSON_HEADERS, trailer: "Grpc-Trailer-Content-Type" },
    body: errorBody(err.code, err.message),
    trailers: ERROR_TRAILERS,
  };
}

/** The error answer of a request refused before any call (a body that does not parse). */
export function requestErrorResponse(code: number, message: string): HttpResponse {
  return jsonResponse(httpStatusOf(code), JSON_HEADERS, errorBody(code, message));
}
