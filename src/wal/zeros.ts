/** Zero-byte scans over segment data: segments are preallocated with zeros, so zeros are "no data". */

const ZEROS = Buffer.alloc(64 * 1024);

/** True if buf[from..to) is all zero. */
export function isZero(buf: Buffer, from: number, to: number): boolean {
  // A record header (16 bytes) is checked per record on every scan: a plain loop, no views.
  if (to - from <= 64) {
    for (let i = from; i < to; i++) if (buf[i] !== 0) return false;
    return true;
  }
  for (let start = from; start < to; start += ZEROS.length) {
    const end = Math.min(to, start + ZEROS.length);
    if (!buf.subarray(start, end).equals(ZEROS.subarray(0, end - start))) return false;
  }
  return true;
}

/** One past the last non-zero byte in buf[from..), or `from` if they are all zero. */
export function nonZeroEnd(buf: Buffer, from: number): number {
  let end = buf.length;
  while (end > from) {
    const start = Math.max(from, end - ZEROS.length);
    if (buf.subarray(start, end).equals(ZEROS.subarray(0, end - start))) {
      end = start;
      continue;
    }
    for (let i = end - 1; i >= start; i--) if (buf[i] !== 0) return i + 1;
  }
  return from;
}

/** The first non-zero byte at or after `from`, or buf.length. */
export function firstNonZero(buf: Buffer, from: number): number {
  for (let i = from; i < buf.length; i++) if (buf[i] !== 0) return i;
  return buf.length;
}
