// Antelope names, the ABI's spelling of identifiers, and the transform's error, for the
// contract transform (contract.js).
const CHARMAP = ".12345abcdefghijklmnopqrstuvwxyz";
const NAME_RE = /^[a-z1-5.]{0,11}[a-z1-5]$/; // the chain's rule (chain/core/primitives/types.py)

/** A misuse of an annotation: reported as a compile error at `range`. */
export class AnnotationError extends Error {
  constructor(range, message) {
    super(message);
    this.range = range;
  }
}

export function fail(node, message) {
  throw new AnnotationError(node.range, message);
}

/** `text` as Antelope's 64-bit name, a hex literal for the generated code; fails at `node`
 * when no account, action or table could be named so. */
export function name(text, node, what) {
  if (!NAME_RE.test(text)) {
    fail(node, `${JSON.stringify(text)} is no valid ${what} name (1-12 of a-z, 1-5 and '.', not ending in '.')`);
  }
  let value = 0n;
  for (let i = 0; i < text.length; i++) {
    value |= BigInt(CHARMAP.indexOf(text[i])) << BigInt(64 - 5 * (i + 1));
  }
  return `0x${value.toString(16).padStart(16, "0")}`;
}

/** `maxSupply` -> `max_supply`: AssemblyScript's camelCase as the ABI's snake_case. */
export function snake(identifier) {
  return identifier
    .replace(/([a-z0-9])([A-Z])/g, "$1_$2")
    .replace(/([A-Z])([A-Z][a-z])/g, "$1_$2")
    .toLowerCase();
}

/** Each action, table and event name once. */
export class Names {
  constructor() {
    this.seen = new Set();
  }

  claim(kind, text, node) {
    const key = `${kind}:${text}`;
    if (this.seen.has(key)) fail(node, `${kind} ${text} is declared twice`);
    this.seen.add(key);
  }
}
