/**
 * base64 as Go's encoding/json decodes a `bytes` field (base64.StdEncoding: padded, '\r' and '\n'
 * skipped), with its error text "illegal base64 data at input byte N" at the offset Go reports:
 * Buffer.from(s, "base64") accepts anything and would turn a typo in a key into another key.
 */

const DECODE = new Int16Array(256).fill(-1);
const ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
for (let i = 0; i < ALPHABET.length; i++) DECODE[ALPHABET.charCodeAt(i)] = i;
const PAD = 0x3d;
const CR = 0x0d;
const LF = 0x0a;

export class Base64Error extends Error {
  constructor(readonly offset: number) {
    super(`illegal base64 data at input byte ${offset}`);
    this.name = "Base64Error";
  }
}

/** Decodes `text` (its UTF-8 bytes) as Go's base64.StdEncoding.Decode does; throws Base64Error. */
export function decodeGoBase64(text: string): Buffer {
  const src = Buffer.from(text, "utf8");
  const out = Buffer.allocUnsafe(Math.floor((src.length * 3) / 4) + 3);
  let n = 0;
  let si = 0;
  const skipNewlines = (): void => {
    while (si < src.length && (src[si] === CR || src[si] === LF)) si++;
  };
  for (;;) {
    const q = [0, 0, 0, 0];
    let j = 0;
    let dlen = 4;
    let end = false;
    for (; j < 4; j++) {
      if (si === src.length) {
        if (j === 0) return out.subarray(0, n);
        // Go's StdEncoding wants padding: a short last quantum is an error at its start.
        throw new Base64Error(si - j);
      }
      const c = src[si++]!;
      const v = DECODE[c]!;
      if (v >= 0) {
        q[j] = v;
        continue;
      }
      if (c === LF || c === CR) {
        j--;
        continue;
      }
      if (c !== PAD) throw new Base64Error(si - 1);
      // Padding: only after two or three symbols, "==" after two.
      if (j < 2) throw new Base64Error(si - 1);
      if (j === 2) {
        skipNewlines();
        if (si === src.length) throw new Base64Error(src.length);
        if (src[si] !== PAD) throw new Base64Error(si - 1);
        si++;
      }
      skipNewlines();
      if (si < src.length) throw new Base64Error(si);
      dlen = j;
      end = true;
      break;
    }
    const v = (q[0]! << 18) | (q[1]! << 12) | (q[2]! << 6) | q[3]!;
    out[n++] = (v >> 16) & 0xff;
    if (dlen > 2) out[n++] = (v >> 8) & 0xff;
    if (dlen > 3) out[n++] = v & 0xff;
    if (end) return out.subarray(0, n);
  }
}
