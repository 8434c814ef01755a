/**
 * JSON as Go's encoding/json reads it, for the gateway's request bodies: etcd's gateway answers a
 * malformed body with Go's scanner text ("invalid character 'b' looking for beginning of object key
 * string"), and clients that script against etcd see those words. JSON.parse cannot say them, so
 * this is a small scanner with Go's states and messages.
 *
 * Values keep what the protobuf mapping needs: numbers as their source text (int64 precision and
 * Go's "cannot unmarshal number 1.5" wording), objects as ordered maps (a repeated key: last wins,
 * as Go's map does).
 */

export class JsonNumber {
  constructor(readonly text: string) {}
}

export type JsonValue = null | boolean | string | JsonNumber | JsonValue[] | JsonObject;
export type JsonObject = Map<string, JsonValue>;

/** A body that is not JSON; the message is Go's. */
export class JsonSyntaxError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "JsonSyntaxError";
  }
}

/** The input ended inside a value: a stream waits for more, a whole body says "unexpected EOF". */
export class JsonIncomplete extends Error {
  constructor() {
    super("unexpected EOF");
    this.name = "JsonIncomplete";
  }
}

/** Nesting limit (Go's decoder allows 10000; a body here never needs more than a few). */
const DEPTH_MAX = 1000;

/** Go's quoteChar: the offending character as Go's messages show it. */
export function quoteChar(c: string): string {
  if (c === "'") return "'\\''";
  if (c === '"') return "'\"'";
  const q = JSON.stringify(c);
  return `'${q.slice(1, -1)}'`;
}

function isSpace(c: string): boolean {
  return c === " " || c === "\t" || c === "\n" || c === "\r";
}

function isDigit(c: string | undefined): boolean {
  return c !== undefined && c >= "0" && c <= "9";
}

class Scanner {
  pos: number;
  private depth = 0;

  constructor(
    private readonly s: string,
    start: number,
  ) {
    this.pos = start;
  }

  private fail(c: string, context: string): never {
    throw new JsonSyntaxError(`invalid character ${quoteChar(c)} ${context}`);
  }

  private peek(): string {
    if (this.pos >= this.s.length) throw new JsonIncomplete();
    return this.s[this.pos]!;
  }

  skipSpace(): void {
    while (this.pos < this.s.length && isSpace(this.s[this.pos]!)) this.pos++;
  }

  value(): JsonValue {
    this.skipSpace();
    const c = this.peek();
    switch (c) {
      case "{":
        return this.object();
      case "[":
        return this.array();
      case '"':
        return this.string();
      case "t":
        return this.literal("true", true);
      case "f":
        return this.literal("false", false);
      case "n":
        return this.literal("null", null);
      default:
        if (c === "-" || isDigit(c)) return this.number();
        return this.fail(c, "looking for beginning of value");
    }
  }

  private nest(): void {
    if (++this.depth > DEPTH_MAX) throw new JsonSyntaxError("exceeded max depth");
  }

  private object(): JsonObject {
    this.nest();
    this.pos++;
    const out: JsonObject = new Map();
    this.skipSpace();
    if (this.peek() === "}") {
      this.pos++;
      this.depth--;
      return out;
    }
    for (;;) {
      this.skipSpace();
      const c = this.peek();
      if (c !== '"') this.fail(c, "looking for beginning of object key string");
      const key = this.string();
      this.skipSpace();
      const colon = this.peek();
      if (colon !== ":") this.fail(colon, "after object key");
      this.pos++;
      out.set(key, this.value());
      this.skipSpace();
      const next = this.peek();
      this.pos++;
      if (next === "}") break;
      if (next !== ",") this.fail(next, "after object key:value pair");
    }
    this.depth--;
    return out;
  }

  private array(): JsonValue[] {
    this.nest();
    this.pos++;
    const out: JsonValue[] = [];
    this.skipSpace();
    if (this.peek() === "]") {
      this.pos++;
      this.depth--;
      return out;
    }
    for (;;) {
      out.push(this.value());
      this.skipSpace();
      const next = this.peek();
      this.pos++;
      if (next === "]") break;
      if (next !== ",") this.fail(next, "after array element");
    }
    this.depth--;
    return out;
  }

  private string(): string {
    const start = ++this.pos;
    let simple = true;
    for (;;) {
      const c = this.peek();
      if (c === '"') break;
      if (c < " ") this.fail(c, "in string literal");
      if (c === "\\") {
        simple = false;
        this.pos++;
        const e = this.peek();
        if (e === "u") {
          for (let i = 0; i < 4; i++) {
            this.pos++;
            const h = this.peek();
            if (!/[0-9a-fA-F]/.test(h)) this.fail(h, "in \\u hexadecimal character escape");
          }
        } else if (!'"\\/bfnrt'.includes(e)) {
          this.fail(e, "in string escape code");
        }
      }
      this.pos++;
    }
    const raw = this.s.slice(start, this.pos);
    this.pos++;
    // The escapes were checked above: JSON.parse decodes them exactly (lone surrogates become
    // U+FFFD when the string is later encoded as UTF-8, as Go's decoder makes them).
    return simple ? raw : (JSON.parse(`"${raw}"`) as string);
  }

  private literal<T>(word: string, v: T): T {
    for (let i = 1; i < word.length; i++) {
      this.pos++;
      const c = this.peek();
      if (c !== word[i]) this.fail(c, `in literal ${word} (expecting ${quoteChar(word[i]!)})`);
    }
    this.pos++;
    return v;
  }

  private number(): JsonNumber {
    const start = this.pos;
    const at = (): string | undefined => this.s[this.pos];
    if (at() === "-") {
      this.pos++;
      const c = this.peek();
      if (!isDigit(c)) this.fail(c, "in numeric literal");
    }
    if (at() === "0") this.pos++;
    else while (isDigit(at())) this.pos++;
    // A number at the very end of the input may go on in the next chunk.
    if (this.pos >= this.s.length) throw new JsonIncomplete();
    if (at() === ".") {
      this.pos++;
      const c = this.peek();
      if (!isDigit(c)) this.fail(c, "after decimal point in numeric literal");
      while (isDigit(at())) this.pos++;
    }
    if (at() === "e" || at() === "E") {
      this.pos++;
      let c = this.peek();
      if (c === "+" || c === "-") {
        this.pos++;
        c = this.peek();
      }
      if (!isDigit(c)) this.fail(c, "in exponent of numeric literal");
      while (isDigit(at())) this.pos++;
    }
    if (this.pos >= this.s.length) throw new JsonIncomplete();
    return new JsonNumber(this.s.slice(start, this.pos));
  }
}

/**
 * Reads one JSON value at `start` as Go's json.Decoder does (what follows it is left for the next
 * read). Returns undefined when only whitespace is left (Go's io.EOF). Throws JsonIncomplete when
 * the input ends inside the value, JsonSyntaxError with Go's text when it is malformed.
 */
export function readJsonValue(s: string, start = 0): { value: JsonValue; end: number } | undefined {
  const sc = new Scanner(s, start);
  sc.skipSpace();
  if (sc.pos >= s.length) return undefined;
  const value = sc.value();
  return { value, end: sc.pos };
}

/** Reads a whole body's first value, a body ending inside it being Go's "unexpected EOF". */
export function parseJsonBody(s: string): JsonValue | undefined {
  // Go's decoder sees the end of the body: a number ending the input is complete then.
  const r = readJsonValue(s + " ");
  return r?.value;
}

/** Go's name of a JSON value's kind, as its UnmarshalTypeError says it ("cannot unmarshal array ..."). */
export function jsonKind(v: JsonValue): string {
  if (v === null) return "null";
  if (typeof v === "boolean") return "bool";
  if (typeof v === "string") return "string";
  if (v instanceof JsonNumber) return "number";
  if (Array.isArray(v)) return "array";
  return "object";
}
