/**
 * Go's %q (strconv.Quote) of a string whose bytes are given as latin1 characters (HPACK strings
 * are bytes; the request texts of the slow-request log are ASCII): double-quoted,
 * `"` and `\\` escaped, valid UTF-8 kept when printable, control characters as \\a-style or \\xNN
 * escapes (\\u00NN for C1 controls), and bytes that are not UTF-8 as \\xNN. (Go's notion of
 * printable covers more of Unicode than this; request paths are ASCII in practice.)
 */
export function goQuote(latin1: string): string {
  const bytes = Buffer.from(latin1, "latin1");
  let out = '"';
  for (let i = 0; i < bytes.length; ) {
    const b = bytes[i]!;
    if (b < 0x80) {
      const ch = String.fromCharCode(b);
      if (ch === '"' || ch === "\\") out += "\\" + ch;
      else if (b >= 0x20 && b < 0x7f) out += ch;
      else out += GO_SHORT_ESCAPES[b] ?? `\\x${hex2(b)}`;
      i++;
      continue;
    }
    const n = b >= 0xf0 && b < 0xf5 ? 4 : b >= 0xe0 ? 3 : b >= 0xc2 && b < 0xe0 ? 2 : 0;
    const seq = n === 0 ? undefined : utf8Rune(bytes, i, n);
    if (seq === undefined) {
      out += `\\x${hex2(b)}`;
      i++;
      continue;
    }
    out += seq < 0xa0 ? `\\u${seq.toString(16).padStart(4, "0")}` : String.fromCodePoint(seq);
    i += n;
  }
  return out + '"';
}

function hex2(b: number): string {
  return b.toString(16).padStart(2, "0");
}

/** The code point of the n-byte UTF-8 sequence at `at`, or undefined if it is not valid UTF-8. */
function utf8Rune(bytes: Buffer, at: number, n: number): number | undefined {
  if (at + n > bytes.length) return undefined;
  const rune = bytes.toString("utf8", at, at + n);
  const c = rune.codePointAt(0)!;
  // Node replaces a bad sequence by U+FFFD; a real U+FFFD is EF BF BD.
  if (c === 0xfffd && !(n === 3 && bytes[at + 1] === 0xbf && bytes[at + 2] === 0xbd)) return undefined;
  if (rune.length !== (c > 0xffff ? 2 : 1)) return undefined;
  return c;
}

const GO_SHORT_ESCAPES: Readonly<Record<number, string>> = { 7: "\\a", 8: "\\b", 12: "\\f", 10: "\\n", 13: "\\r", 9: "\\t", 11: "\\v" };
