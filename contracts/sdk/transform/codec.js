// How each AssemblyScript type of a field, parameter or result is encoded: its ABI type, and
// the Datastream calls that read and write it (Antelope's binary form). Lists, optionals and
// structs get a helper function each, generated once per source file.
import { fail, snake } from "./names.js";

// AssemblyScript type -> [ABI type, Datastream method suffix]
const SCALARS = new Map([
  ["bool", ["bool", "Bool"]],
  ["u8", ["u8", "U8"]], ["u16", ["u16", "U16"]], ["u32", ["u32", "U32"]], ["u64", ["u64", "U64"]],
  ["i8", ["i8", "I8"]], ["i16", ["i16", "I16"]], ["i32", ["i32", "I32"]], ["i64", ["i64", "I64"]],
  ["f64", ["f64", "F64"]],
  ["Name", ["name", "Name"]],
  ["string", ["string", "String"]],
  ["Uint8Array", ["bytes", "Bytes"]],
  ["Checksum256", ["checksum256", "Checksum256"]],
  ["Symbol", ["symbol", "Symbol"]],
  ["Asset", ["asset", "Asset"]],
]);
// SDK classes with their own `read`/`write` -> their ABI type (the SDK's int128.ts, time.ts).
const BUILTINS = new Map([
  ["U128", "u128"], ["I128", "i128"],
  ["TimePoint", "time_point"], ["TimePointSec", "time_point_sec"],
  ["BlockTimestamp", "block_timestamp_type"],
]);
const SUPPORTED = [...SCALARS.keys(), ...BUILTINS.keys(), "Array<T>", "T | null", "a class of the contract"].join(", ");

/** `Array<u64>` -> ["array", "u64"], `Foo|null` -> ["optional", "Foo"], ... */
function shape(type) {
  if (type.endsWith("|null")) return ["optional", type.slice(0, -"|null".length)];
  const list = /^Array<(.+)>$/.exec(type);
  if (list) return ["array", list[1]];
  if (SCALARS.has(type)) return ["scalar", type];
  if (BUILTINS.has(type)) return ["class", type];
  if (/^[A-Z][A-Za-z0-9_]*$/.test(type)) return ["class", type];
  return ["unknown", type];
}

const key = (type) => type.replace(/[^A-Za-z0-9]+/g, "_");

export class Codec {
  constructor(abi, tail) {
    this.abi = abi;
    this.tail = tail; // where helper functions go
    this.helpers = new Set();
    this.wanted = new Map(); // class name -> ABI struct name, for the structs fields name
  }

  abiType(type, node) {
    const [kind, inner] = shape(type);
    if (kind === "optional") return `${this.abiType(inner, node)}?`;
    if (kind === "array") {
      if (inner === "u8") fail(node, "a list of bytes is a Uint8Array (ABI bytes)");
      return `${this.abiType(inner, node)}[]`;
    }
    if (kind === "scalar") return SCALARS.get(type)[0];
    if (BUILTINS.has(type)) return BUILTINS.get(type);
    if (kind === "class") {
      const known = this.abi.structsByClass.get(type);
      if (known) return known;
      this.wanted.set(type, snake(type));
      return snake(type);
    }
    return fail(node, `type ${type} has no ABI form; use one of ${SUPPORTED}`);
  }

  /** An expression reading a `type` from `ds`. */
  read(type, node, ds = "ds") {
    const [kind] = shape(type);
    this.abiType(type, node);
    if (kind === "scalar") return `${ds}.read${SCALARS.get(type)[1]}()`;
    return `__bor_read_${this.helper(type, node)}(${ds})`;
  }

  /** A statement writing `expr` (a `type`) to `ds`. */
  write(type, expr, node, ds = "ds") {
    const [kind] = shape(type);
    this.abiType(type, node);
    if (kind === "scalar") return `${ds}.write${SCALARS.get(type)[1]}(${expr});`;
    if (kind === "class") return `${expr}.write(${ds});`;
    return `__bor_write_${this.helper(type, node)}(${ds}, ${expr});`;
  }

  helper(type, node) {
    const k = key(type);
    if (this.helpers.has(k)) return k;
    this.helpers.add(k);
    const [kind, inner] = shape(type);
    const DS = "ds: __bor_Datastream";
    if (kind === "class") {
      this.tail.push(`function __bor_read_${k}(${DS}): ${type} { const v = instantiate<${type}>(); v.read(ds); return v; }`);
    } else if (kind === "array") {
      // Every element takes a byte at least: a count past the bytes left is refused before
      // anything is allocated for it.
      this.tail.push(`function __bor_read_${k}(${DS}): ${type} { const n = ds.readVarUint32(); __bor_check(n <= <u32>ds.remaining, "datastream: more elements than bytes"); const v = new ${type}(); for (let i: u32 = 0; i < n; i++) v.push(${this.read(inner, node)}); return v; }`);
      this.tail.push(`function __bor_write_${k}(${DS}, v: ${type}): void { ds.writeVarUint32(<u32>v.length); for (let i = 0; i < v.length; i++) { ${this.write(inner, "v[i]", node)} } }`);
    } else if (kind === "optional") {
      this.tail.push(`function __bor_read_${k}(${DS}): ${inner} | null { return ds.readBool() ? ${this.read(inner, node)} : null; }`);
      this.tail.push(`function __bor_write_${k}(${DS}, v: ${inner} | null): void { if (v === null) { ds.writeU8(0); } else { ds.writeU8(1); ${this.write(inner, "v!", node)} } }`);
    }
    return k;
  }
}
