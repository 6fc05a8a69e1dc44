import { truncateForMessage } from "@ckpt/errors";
import { ManifestError, type ManifestErrorCode } from "../errors.js";

/** A JSON value as produced by {@link parseStrictJson}. */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

/** Default nesting cap: ckpt records nest fewer than 10 levels; 64 bounds the recursion of a crafted file. */
const MAX_JSON_DEPTH = 64;
/** Default text cap (UTF-16 code units): matches the 64 MiB record-file cap; bounds memory and time. */
const MAX_JSON_TEXT_LENGTH = 64 * 1024 * 1024;
/** Hard ceiling on a caller-chosen depth: the parser recurses once per level, so stay far below the stack limit. */
const MAX_ALLOWED_DEPTH = 1000;

export interface StrictJsonOptions {
  /** Names the input in error messages and in `ManifestError.file` (a path or URI, never a secret). */
  name: string;
  /** Deepest allowed nesting of arrays/objects; default {@link MAX_JSON_DEPTH}. */
  maxDepth?: number;
  /** Longest allowed text in UTF-16 code units; default {@link MAX_JSON_TEXT_LENGTH}. */
  maxLength?: number;
  /**
   * Refuse every number written with a fraction or an exponent (`1.0`, `4e0`), whatever its value
   * (`JSON_NOT_INTEGER`), for formats whose numbers are all integers, as their reference parsers read them.
   */
  integersOnly?: boolean;
  /**
   * Read an integer beyond 2^53 as the nearest double instead of refusing it, for files that are
   * checked and copied byte for byte, never rewritten from the parsed value (transformers writes
   * `model_max_length: 1000000000000000019884624838656` into tokenizer_config.json by default).
   */
  approximateLargeIntegers?: boolean;
}

/**
 * Parses RFC 8259 JSON, refusing what `JSON.parse` silently accepts or mangles: duplicate object
 * keys (last-wins hides tampering), a leading byte-order mark, lone surrogate escapes (they cannot
 * round-trip through UTF-8), integers beyond 2^53 (they would silently lose precision), numbers
 * that overflow to Infinity, and nesting deeper than `maxDepth`. Errors carry line, column and
 * offset, and a JSON path in `field` when one is known.
 */
export function parseStrictJson(text: string, options: StrictJsonOptions): JsonValue {
  const maxDepth = options.maxDepth ?? MAX_JSON_DEPTH;
  const maxLength = options.maxLength ?? MAX_JSON_TEXT_LENGTH;
  if (!Number.isInteger(maxDepth) || maxDepth < 1 || maxDepth > MAX_ALLOWED_DEPTH) {
    throw new RangeError(`parseStrictJson: maxDepth must be an integer in 1..${MAX_ALLOWED_DEPTH}`);
  }
  if (text.length > maxLength) {
    throw new ManifestError(
      "JSON_TOO_LONG",
      `parse ${options.name}: JSON text is ${text.length} characters; the limit is ${maxLength}. Is this really a record?`,
      { kind: "input", file: options.name },
    );
  }
  return new Parser(
    text,
    options.name,
    maxDepth,
    options.integersOnly === true,
    options.approximateLargeIntegers === true,
  ).parseDocument();
}

// biome-ignore lint/suspicious/noControlCharactersInRegex: the run stops at control characters on purpose
const PLAIN_RUN = /[^"\\\u0000-\u001f]*/y;

class Parser {
  private pos = 0;
  private readonly path: Array<string | number> = [];

  constructor(
    private readonly text: string,
    private readonly name: string,
    private readonly maxDepth: number,
    private readonly integersOnly: boolean,
    private readonly approximateLargeIntegers: boolean,
  ) {}

  parseDocument(): JsonValue {
    if (this.text.charCodeAt(0) === 0xfeff) {
      throw this.error("JSON_BOM", "starts with a UTF-8 byte-order mark", "Write the file without a BOM");
    }
    this.skipWhitespace();
    const value = this.parseValue(0);
    this.skipWhitespace();
    if (this.pos < this.text.length) {
      throw this.error(
        "JSON_SYNTAX",
        `unexpected ${this.describeHere()} after the top-level value`,
        "A record holds exactly one JSON value",
      );
    }
    return value;
  }

  private parseValue(depth: number): JsonValue {
    const c = this.text.charCodeAt(this.pos);
    switch (c) {
      case 0x7b /* { */:
        return this.parseObject(depth + 1);
      case 0x5b /* [ */:
        return this.parseArray(depth + 1);
      case 0x22 /* " */:
        return this.parseString();
      case 0x74 /* t */:
        return this.parseLiteral("true", true);
      case 0x66 /* f */:
        return this.parseLiteral("false", false);
      case 0x6e /* n */:
        return this.parseLiteral("null", null);
      default:
        if (c === 0x2d || (c >= 0x30 && c <= 0x39)) return this.parseNumber();
        throw this.unexpected("a JSON value");
    }
  }

  private enter(depth: number): void {
    if (depth > this.maxDepth) {
      throw this.error(
        "JSON_TOO_DEEP",
        `nesting is deeper than ${this.maxDepth} levels`,
        "Records are shallow; this input is malformed or hostile",
      );
    }
  }

  private parseObject(depth: number): JsonValue {
    this.enter(depth);
    this.pos++;
    const out: { [key: string]: JsonValue } = {};
    this.skipWhitespace();
    if (this.text.charCodeAt(this.pos) === 0x7d /* } */) {
      this.pos++;
      return out;
    }
    for (;;) {
      if (this.text.charCodeAt(this.pos) !== 0x22) throw this.unexpected("an object key (a string)");
      const keyStart = this.pos;
      const key = this.parseString();
      if (Object.hasOwn(out, key)) {
        this.pos = keyStart;
        this.path.push(key);
        throw this.error(
          "JSON_DUPLICATE_KEY",
          `key ${truncateForMessage(key)} appears twice in one object`,
          "Each key may appear once; a repeated key hides one of the values",
        );
      }
      this.skipWhitespace();
      if (this.text.charCodeAt(this.pos) !== 0x3a /* : */) throw this.unexpected("':' after an object key");
      this.pos++;
      this.skipWhitespace();
      this.path.push(key);
      const value = this.parseValue(depth);
      this.path.pop();
      if (key === "__proto__") {
        // Assignment would replace the prototype; define it as the ordinary own property it is.
        Object.defineProperty(out, key, { value, enumerable: true, writable: true, configurable: true });
      } else {
        out[key] = value;
      }
      this.skipWhitespace();
      const c = this.text.charCodeAt(this.pos);
      if (c === 0x2c /* , */) {
        this.pos++;
        this.skipWhitespace();
        continue;
      }
      if (c === 0x7d /* } */) {
        this.pos++;
        return out;
      }
      throw this.unexpected("',' or '}' in an object");
    }
  }

  private parseArray(depth: number): JsonValue {
    this.enter(depth);
    this.pos++;
    const out: JsonValue[] = [];
    this.skipWhitespace();
    if (this.text.charCodeAt(this.pos) === 0x5d /* ] */) {
      this.pos++;
      return out;
    }
    for (;;) {
      this.path.push(out.length);
      out.push(this.parseValue(depth));
      this.path.pop();
      this.skipWhitespace();
      const c = this.text.charCodeAt(this.pos);
      if (c === 0x2c /* , */) {
        this.pos++;
        this.skipWhitespace();
        continue;
      }
      if (c === 0x5d /* ] */) {
        this.pos++;
        return out;
      }
      throw this.unexpected("',' or ']' in an array");
    }
  }

  private parseString(): string {
    const text = this.text;
    this.pos++;
    let out = "";
    let runStart = this.pos;
    for (;;) {
      // Skip a run of ordinary characters at regex speed; the loop below handles what stops it.
      PLAIN_RUN.lastIndex = this.pos;
      PLAIN_RUN.test(text);
      this.pos = PLAIN_RUN.lastIndex;
      if (this.pos >= text.length) throw this.unexpected("the closing '\"' of a string");
      const c = text.charCodeAt(this.pos);
      if (c === 0x22) {
        out += text.slice(runStart, this.pos);
        this.pos++;
        return out;
      }
      if (c < 0x20) {
        throw this.error(
          "JSON_SYNTAX",
          `raw control character U+${c.toString(16).padStart(4, "0")} inside a string`,
          "Escape it (for example \\n or \\u0000)",
        );
      }
      if (c === 0x5c /* \ */) {
        out += text.slice(runStart, this.pos);
        out += this.parseEscape();
        runStart = this.pos;
        continue;
      }
      this.pos++;
    }
  }

  private parseEscape(): string {
    const e = this.text.charCodeAt(this.pos + 1);
    this.pos += 2;
    switch (e) {
      case 0x22:
        return '"';
      case 0x5c:
        return "\\";
      case 0x2f:
        return "/";
      case 0x62:
        return "\b";
      case 0x66:
        return "\f";
      case 0x6e:
        return "\n";
      case 0x72:
        return "\r";
      case 0x74:
        return "\t";
      case 0x75: {
        const unit = this.readHex4();
        if (unit >= 0xdc00 && unit <= 0xdfff) throw this.loneSurrogate();
        if (unit >= 0xd800 && unit <= 0xdbff) {
          if (this.text.charCodeAt(this.pos) !== 0x5c || this.text.charCodeAt(this.pos + 1) !== 0x75) {
            throw this.loneSurrogate();
          }
          this.pos += 2;
          const low = this.readHex4();
          if (low < 0xdc00 || low > 0xdfff) throw this.loneSurrogate();
          return String.fromCharCode(unit, low);
        }
        return String.fromCharCode(unit);
      }
      default:
        this.pos -= 2;
        if (Number.isNaN(e)) {
          this.pos = this.text.length;
          throw this.unexpected("an escape sequence");
        }
        throw this.error(
          "JSON_SYNTAX",
          "invalid escape sequence in a string",
          'Valid escapes are \\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX',
        );
    }
  }

  private readHex4(): number {
    let value = 0;
    for (let i = 0; i < 4; i++) {
      const c = this.text.charCodeAt(this.pos);
      let digit: number;
      if (c >= 0x30 && c <= 0x39) digit = c - 0x30;
      else if (c >= 0x61 && c <= 0x66) digit = c - 0x57;
      else if (c >= 0x41 && c <= 0x46) digit = c - 0x37;
      else throw this.unexpected("a hex digit in a \\u escape");
      value = value * 16 + digit;
      this.pos++;
    }
    return value;
  }

  private loneSurrogate(): ManifestError {
    return this.error(
      "JSON_SYNTAX",
      "a \\u escape encodes half of a UTF-16 surrogate pair",
      "Such a string cannot be written as UTF-8",
    );
  }

  private parseNumber(): number {
    const text = this.text;
    const start = this.pos;
    let integral = true;
    if (text.charCodeAt(this.pos) === 0x2d) this.pos++;
    const first = text.charCodeAt(this.pos);
    if (first === 0x30) {
      this.pos++;
    } else if (first >= 0x31 && first <= 0x39) {
      this.skipDigits();
    } else {
      throw this.unexpected("a digit");
    }
    if (text.charCodeAt(this.pos) === 0x2e /* . */) {
      integral = false;
      this.pos++;
      if (!this.skipDigits()) throw this.unexpected("a digit after '.'");
    }
    const e = text.charCodeAt(this.pos);
    if (e === 0x65 || e === 0x45) {
      integral = false;
      this.pos++;
      const sign = text.charCodeAt(this.pos);
      if (sign === 0x2b || sign === 0x2d) this.pos++;
      if (!this.skipDigits()) throw this.unexpected("a digit in an exponent");
    }
    const literal = text.slice(start, this.pos);
    const value = Number(literal);
    const inexact = integral && !Number.isSafeInteger(value) && !this.approximateLargeIntegers;
    if (!Number.isFinite(value) || inexact) {
      this.pos = start;
      throw this.error(
        "JSON_NUMBER_OUT_OF_RANGE",
        `number ${truncateForMessage(literal)} cannot be represented exactly`,
        "Integers must lie within ±(2^53-1) and numbers must be finite",
      );
    }
    if (!integral && this.integersOnly) {
      this.pos = start;
      throw this.error(
        "JSON_NOT_INTEGER",
        `number ${truncateForMessage(literal)} has a fraction or an exponent`,
        "Numbers here are integers, written without a fraction or an exponent",
      );
    }
    return value;
  }

  private skipDigits(): boolean {
    const start = this.pos;
    for (;;) {
      const c = this.text.charCodeAt(this.pos);
      // charCodeAt past the end is NaN, which fails both range tests, so test membership positively.
      if (!(c >= 0x30 && c <= 0x39)) return this.pos > start;
      this.pos++;
    }
  }

  private parseLiteral(word: string, value: JsonValue): JsonValue {
    if (this.text.startsWith(word, this.pos)) {
      this.pos += word.length;
      return value;
    }
    throw this.unexpected("a JSON value");
  }

  private skipWhitespace(): void {
    for (;;) {
      const c = this.text.charCodeAt(this.pos);
      if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) this.pos++;
      else return;
    }
  }

  private describeHere(): string {
    const c = this.text[this.pos];
    if (c === undefined) return "end of input";
    return `character ${truncateForMessage(c)}`;
  }

  private unexpected(expected: string): ManifestError {
    if (this.pos >= this.text.length) {
      return this.error(
        "JSON_TRUNCATED",
        `input ends where ${expected} was expected`,
        "The file looks truncated",
      );
    }
    return this.error(
      "JSON_SYNTAX",
      `unexpected ${this.describeHere()} where ${expected} was expected`,
      "Fix the JSON",
    );
  }

  private error(code: ManifestErrorCode, what: string, hint: string): ManifestError {
    let line = 1;
    let lineStart = 0;
    for (let i = 0; i < this.pos && i < this.text.length; i++) {
      if (this.text.charCodeAt(i) === 0x0a) {
        line++;
        lineStart = i + 1;
      }
    }
    const where = `line ${line} column ${this.pos - lineStart + 1} (offset ${this.pos})`;
    const field = this.path.length > 0 ? jsonPath(this.path) : undefined;
    const at = field === undefined ? "" : ` in ${field}`;
    return new ManifestError(code, `parse ${this.name}: ${what}${at} at ${where}. ${hint}.`, {
      kind: "input",
      file: this.name,
      field,
    });
  }
}

/** Longest rendered key path; deeper paths (a hostile nesting) are cut. */
const MAX_JSON_PATH_LENGTH = 200;

/** Renders a key path as `a.b[0].c`, quoting keys that are not plain identifiers. */
export function jsonPath(segments: ReadonlyArray<string | number>): string {
  let out = "";
  for (const seg of segments) {
    if (typeof seg === "number") out += `[${seg}]`;
    else if (/^[A-Za-z_][A-Za-z0-9_]*$/.test(seg)) out += out === "" ? seg : `.${seg}`;
    else out += `[${truncateForMessage(seg)}]`;
    if (out.length > MAX_JSON_PATH_LENGTH) return `${out.slice(0, MAX_JSON_PATH_LENGTH)}…`;
  }
  return out;
}
