// Antelope's 64-bit names: up to 12 characters of `.12345a-z`, 5 bits each, the first
// character in the highest bits, so names compare (and tables sort) as their text does.
import { check } from "./system";

/** An account, action, table or event name as a 64-bit number. */
export type Name = u64;

function charValue(c: i32): u64 {
  if (c >= 0x61 && c <= 0x7a) return <u64>(c - 0x61 + 6); // a-z
  if (c >= 0x31 && c <= 0x35) return <u64>(c - 0x31 + 1); // 1-5
  if (c == 0x2e) return 0; // .
  check(false, "invalid character in name");
  return 0;
}

/** The name `text` as a number: `n("alice")`. Aborts on a name no account could have. */
export function n(text: string): Name {
  const len = text.length;
  check(len <= 12, "name longer than 12 characters");
  let value: u64 = 0;
  for (let i = 0; i < len; i++) {
    value |= charValue(text.charCodeAt(i)) << <u64>(64 - 5 * (i + 1));
  }
  return value;
}

const CHARMAP = ".12345abcdefghijklmnopqrstuvwxyz";

/** The text of a name: `nameToString(n("alice")) == "alice"`. */
export function nameToString(value: Name): string {
  let text = "";
  for (let i = 0; i < 12; i++) {
    text += CHARMAP.charAt(<i32>((value >> <u64>(64 - 5 * (i + 1))) & 0x1f));
  }
  let end = text.length;
  while (end > 0 && text.charCodeAt(end - 1) == 0x2e) end--;
  return text.substring(0, end);
}
