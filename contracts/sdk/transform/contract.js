// The SDK's source annotations, read at build time (what the CDT's [[eosio::action]] and
// [[eosio::table]] attributes do): from `@contract`, `@action`, `@readonly`, `@on_notify`,
// `@table`, `@primary`, `@secondary` and `@event` this transform writes the ABI, every
// annotated class's `write`/`read` (and a table row's `primaryKey`, `secondaryKeys` and
// `indexSpecs`), and the module's `apply` dispatcher, so that code and ABI cannot disagree.
//
// It rewrites each annotated source as text and parses it again (the approach of
// near-sdk-as): annotations are blanked, generated members go on the line of the class's
// closing brace and generated functions after the last line, so every line of the user's
// code keeps its number and a compile error still points at it. A misuse of an annotation is
// a compile error at its place ("ERROR AS109: Transform 'bor': ..." with file and line).
// `bor-contract build` sets BOR_ABI_OUT to the file the ABI goes to.
import { writeFileSync } from "node:fs";
import { ASTBuilder, CommonFlags, NodeKind, SourceKind } from "assemblyscript";
import { AnnotationError, Names, fail, name, snake } from "./names.js";
import { Codec } from "./codec.js";

const TRANSFORM_ERROR = 109; // DiagnosticCode.Transform_0_1: "Transform '{0}': {1}."
const CLASS_ANNOTATIONS = new Set(["contract", "table", "event"]);
const MEMBER_ANNOTATIONS = new Set(["action", "readonly", "on_notify", "primary", "secondary"]);
const MAX_SECONDARY = 16; // Antelope's multi_index takes at most 16 secondary indexes
const IMPORTS = ["Datastream", "Row", "Serializable", "check", "nameToString", "setReturnValue",
  "emitEvent", "__bor_enter", "SecondaryKey", "IndexSpec", "KeyType"];
// An index's key type -> the field types it may index, and the key built from a field `v`.
const INDEX_KEYS = {
  u64: [["u64", "u32", "u16", "u8", "Name"], (v) => `__bor_SecondaryKey.u64(<u64>${v})`, "U64"],
  u128: [["U128"], (v) => `__bor_SecondaryKey.u128(${v}.hi, ${v}.lo)`, "U128"],
  checksum256: [["Checksum256"], (v) => `__bor_SecondaryKey.checksum256(${v})`, "Checksum256"],
  double: [["f64"], (v) => `__bor_SecondaryKey.double(${v})`, "Double"],
};

const text = (range) => range.source.text.substring(range.start, range.end);
const typeText = (node) => ASTBuilder.build(node).replace(/\s+/g, "");
const decoratorName = (d) => (d.name.kind === NodeKind.Identifier ? d.name.text : "");
const annotations = (node, known) =>
  (node.decorators || []).filter((d) => known.has(decoratorName(d)));

function stringArg(decorator, index, what) {
  const args = decorator.args || [];
  const arg = args[index];
  if (!arg || arg.kind !== NodeKind.Literal || typeof arg.value !== "string") {
    fail(decorator, `@${decoratorName(decorator)} takes ${what} as a string literal`);
  }
  return arg.value;
}

/** `@action`, `@action("name")`, `@action({ readOnly: true })`, `@action("name", { readOnly: true })`. */
function actionOptions(decorator) {
  const out = { name: null, readOnly: false };
  for (const arg of decorator.args || []) {
    if (arg.kind === NodeKind.Literal && typeof arg.value === "string") {
      out.name = arg.value;
    } else if (arg.kind === NodeKind.Literal && arg.names) {
      arg.names.forEach((key, i) => {
        const value = arg.values[i];
        if (key.text !== "readOnly" || value.kind !== NodeKind.True && value.kind !== NodeKind.False) {
          fail(arg, "@action's options are { readOnly: true | false }");
        }
        out.readOnly = value.kind === NodeKind.True;
      });
    } else {
      fail(arg, "@action takes an action name (string) and/or { readOnly: true }");
    }
  }
  return out;
}

/** What one source declares: its annotated classes, and the edits that implement them. */
class SourcePlan {
  constructor(source, abi) {
    this.source = source;
    this.abi = abi;
    this.edits = []; // [position, deleteCount, insert]
    this.tail = []; // generated top-level code, after the last line
    this.codec = new Codec(abi, this.tail);
    this.classes = new Map(); // class name -> ClassDeclaration
    for (const st of source.statements) {
      if (st.kind === NodeKind.ClassDeclaration) this.classes.set(st.name.text, st);
    }
  }

  blank(node) {
    this.edits.push([node.range.start, node.range.end - node.range.start,
      " ".repeat(node.range.end - node.range.start)]);
  }

  run() {
    for (const decl of this.classes.values()) {
      const marks = annotations(decl, CLASS_ANNOTATIONS);
      marks.forEach((d) => this.blank(d));
      if (marks.length > 1) fail(marks[1], "a class takes one of @contract, @table, @event");
      const kind = marks.length ? decoratorName(marks[0]) : null;
      if (kind && !this.abi.first) this.abi.first = marks[0];
      if (kind === "table") this.table(decl, stringArg(marks[0], 0, "the table's name"));
      else if (kind === "event") this.event(decl, stringArg(marks[0], 0, "the event's name"));
      else if (kind === "contract") this.contract(decl);
      else {
        for (const m of decl.members) {
          const stray = annotations(m, MEMBER_ANNOTATIONS)[0];
          if (stray) fail(stray, `@${decoratorName(stray)} belongs in a @contract or @table class`);
        }
      }
    }
    for (const st of this.source.statements) {
      if (st.kind !== NodeKind.ClassDeclaration && annotations(st, CLASS_ANNOTATIONS).length) {
        fail(st.decorators[0], "annotations go on classes and their methods and fields");
      }
    }
    // The structs that fields and parameters use, declared in this file (their serializers).
    for (let more = true; more;) {
      more = false;
      for (const [className, abiName] of [...this.codec.wanted]) {
        const decl = this.classes.get(className);
        if (!decl || this.abi.structsByClass.has(className)) continue;
        const { members } = this.struct(decl, abiName, "Serializable");
        this.closeClass(decl, members);
        more = true;
      }
    }
    return this.edits.length > 0;
  }

  fields(decl) {
    const out = [];
    for (const m of decl.members) {
      if (m.kind !== NodeKind.FieldDeclaration || m.flags & CommonFlags.Static) continue;
      if (!m.type) fail(m, `give field ${m.name.text} a type: it is encoded by its type`);
      out.push({ decl: m, member: m.name.text, abiName: snake(m.name.text), type: typeText(m.type) });
    }
    return out;
  }

  /** Make `decl` a serializable struct named `abiName`: extends, constructor, write, read. */
  struct(decl, abiName, base) {
    if (decl.typeParameters && decl.typeParameters.length) fail(decl, "a generic class has no ABI form");
    const fields = this.fields(decl);
    const abiFields = fields.map((f) => ({ name: f.abiName, type: this.codec.abiType(f.type, f.decl) }));
    this.abi.addStruct(abiName, abiFields, decl);
    this.abi.structsByClass.set(decl.name.text, abiName);
    const has = (n) => decl.members.some((m) => m.name.text === n && !(m.flags & CommonFlags.Static));
    if (!decl.extendsType) {
      this.edits.push([decl.name.range.end, 0, ` extends __bor_${base}`]);
      const ctor = decl.members.find((m) => m.kind === NodeKind.MethodDeclaration && m.flags & CommonFlags.Constructor);
      if (ctor && ctor.body && !/\bsuper\s*\(/.test(text(ctor.body.range))) {
        this.edits.push([ctor.body.range.start + 1, 0, " super();"]);
      }
    }
    const members = [];
    if (!has("write")) {
      const body = fields.map((f) => this.codec.write(f.type, `this.${f.member}`, f.decl)).join(" ");
      members.push(`write(ds: __bor_Datastream): void { ${body} }`);
    }
    if (!has("read")) {
      const body = fields.map((f) => `this.${f.member} = ${this.codec.read(f.type, f.decl)};`).join(" ");
      members.push(`read(ds: __bor_Datastream): void { ${body} }`);
    }
    return { fields, members, has };
  }

  closeClass(decl, members) {
    if (members.length) this.edits.push([decl.range.end - 1, 0, ` ${members.join(" ")} `]);
  }

  table(decl, tableName) {
    name(tableName, decl.decorators[0], "table");
    const rowStruct = snake(decl.name.text);
    const { members, has } = this.struct(decl, rowStruct, "Row");
    let primary = null;
    const secondary = [];
    for (const m of decl.members) {
      for (const d of annotations(m, MEMBER_ANNOTATIONS)) {
        this.blank(d);
        const kind = decoratorName(d);
        if (kind === "primary") {
          if (primary) fail(d, "a table has one @primary key");
          const isGetter = m.kind === NodeKind.MethodDeclaration && m.flags & CommonFlags.Get;
          if (m.kind !== NodeKind.FieldDeclaration && !isGetter) fail(d, "@primary goes on a field or a getter");
          const type = m.kind === NodeKind.FieldDeclaration ? typeText(m.type) : typeText(m.signature.returnType);
          if (!["u64", "Name"].includes(type)) fail(d, `the primary key is a u64, not ${type}`);
          primary = m.name.text;
        } else if (kind === "secondary") {
          if (m.kind !== NodeKind.FieldDeclaration) fail(d, "@secondary goes on a field of the row");
          const indexName = stringArg(d, 0, "the index's name");
          const keyType = stringArg(d, 1, 'the key type ("u64", "u128", "checksum256" or "double")');
          if (!["u64", "u128", "checksum256", "double"].includes(keyType)) {
            fail(d, `index key type ${JSON.stringify(keyType)}: one of u64, u128, checksum256, double`);
          }
          const defaultTable = `${tableName}.${indexName}`;
          const indexTable = (d.args || []).length > 2 ? stringArg(d, 2, "the index's table name") : defaultTable;
          if (!/^[a-z1-5.]{0,11}[a-z1-5]$/.test(indexTable)) {
            fail(d, `index table ${JSON.stringify(indexTable)} is no valid name: give one as @secondary's third argument`);
          }
          if (!/^[A-Za-z_][A-Za-z0-9_]{0,63}$/.test(indexName)) fail(d, `index name ${JSON.stringify(indexName)} is no identifier`);
          secondary.push({ name: indexName, table: indexTable, type: keyType, field: snake(m.name.text), member: m.name.text, decorator: d, fieldType: typeText(m.type) });
        } else {
          fail(d, `@${kind} belongs in a @contract class`);
        }
      }
    }
    if (secondary.length > MAX_SECONDARY) fail(secondary[MAX_SECONDARY].decorator, `a table has at most ${MAX_SECONDARY} secondary indexes`);
    if (!primary && !has("primaryKey")) fail(decl, `table ${tableName}: mark its primary key (a u64 field or getter) @primary`);
    if (primary && !has("primaryKey")) members.push(`primaryKey(): u64 { return <u64>this.${primary}; }`);
    const first = secondary[0];
    if (first && first.type === "u64" && !has("secondaryKey")) {
      members.push(`secondaryKey(): u64 { return <u64>this.${first.member}; }`);
    }
    members.push(...indexMembers(secondary, has));
    this.closeClass(decl, members);
    this.abi.addTable(tableName, rowStruct, secondary.map(({ name: n, table, type, field }) => ({ name: n, table, type, field })), decl);
  }

  event(decl, eventName) {
    const id = name(eventName, decl.decorators[0], "event");
    const { members, has } = this.struct(decl, snake(decl.name.text), "Serializable");
    if (!has("emit")) members.push(`emit(): void { __bor_emitEvent(${id}, this.pack()); }`);
    this.closeClass(decl, members);
    this.abi.addEvent(eventName, snake(decl.name.text), decl);
  }

  contract(decl) {
    if (this.abi.contract) fail(decl, `one @contract class per contract (${this.abi.contract} is one)`);
    this.abi.contract = decl.name.text;
    const actions = [];
    const notifies = [];
    for (const m of decl.members) {
      const marks = annotations(m, MEMBER_ANNOTATIONS);
      marks.forEach((d) => this.blank(d));
      if (!marks.length) continue;
      if (m.kind !== NodeKind.MethodDeclaration || m.flags & (CommonFlags.Static | CommonFlags.Get | CommonFlags.Set | CommonFlags.Constructor)) {
        fail(marks[0], "actions and handlers are instance methods of the contract");
      }
      const params = m.signature.parameters.map((p) => {
        if (!p.type) fail(p, `give parameter ${p.name.text} a type`);
        return { member: p.name.text, abiName: snake(p.name.text), type: typeText(p.type), node: p };
      });
      const returns = typeText(m.signature.returnType);
      const action = marks.find((d) => decoratorName(d) === "action");
      const readonly = marks.some((d) => decoratorName(d) === "readonly");
      const notify = marks.find((d) => decoratorName(d) === "on_notify");
      const other = marks.find((d) => !["action", "readonly", "on_notify"].includes(decoratorName(d)));
      if (other) fail(other, `@${decoratorName(other)} belongs in a @table class`);
      if (notify && (action || readonly)) fail(notify, "a method is an action or a notification handler, not both");
      if (notify) {
        const target = stringArg(notify, 0, 'what it handles, "contract::action" or "*::action"');
        const match = /^([^:]+)::([^:]+)$/.exec(target);
        if (!match) fail(notify, `@on_notify("${target}"): expected "contract::action" or "*::action"`);
        const contractId = match[1] === "*" ? null : name(match[1], notify, "contract");
        const actionId = name(match[2], notify, "action");
        if (returns !== "void") fail(m.signature.returnType, "a notification handler returns void");
        notifies.push({ method: m.name.text, params, contract: match[1], action: match[2], contractId, actionId, node: m });
        continue;
      }
      const options = action ? actionOptions(action) : { name: null, readOnly: false };
      const actionName = options.name ?? m.name.text.toLowerCase();
      const id = name(actionName, action || marks[0], `action (rename it: @action("name"))`);
      actions.push({ name: actionName, id, method: m.name.text, params, returns, readOnly: options.readOnly || readonly, node: m });
    }
    for (const a of actions) {
      const struct = a.name.replace(/\./g, "_");
      this.abi.addStruct(struct, a.params.map((p) => ({ name: p.abiName, type: this.codec.abiType(p.type, p.node) })), a.node);
      const result = a.returns === "void" ? null : this.codec.abiType(a.returns, a.node.signature.returnType);
      this.abi.addAction(a.name, struct, a.readOnly, result, a.node);
    }
    for (const h of notifies) {
      h.params.forEach((p) => this.codec.abiType(p.type, p.node));
      this.abi.notify.push({ contract: h.contract, action: h.action });
    }
    this.tail.push(dispatcher(decl.name.text, actions, notifies, this.codec));
  }

  /** The rewritten source text, or null when it holds no annotation. */
  rewritten() {
    if (!this.run()) return null;
    let out = this.source.text;
    const edits = [...this.edits].sort((a, b) => b[0] - a[0]);
    for (const [at, remove, insert] of edits) out = out.slice(0, at) + insert + out.slice(at + remove);
    const imports = IMPORTS.map((i) => `${i} as __bor_${i.replace(/^__bor_/, "")}`).join(", ");
    return `import { ${imports} } from "sdk"; ${out}\n${this.tail.join("\n")}\n`;
  }
}

/** A row's `secondaryKeys()` (every index's key, in declaration order) and `indexSpecs()` (so
 * a Table of it keeps every index without `Table.index`), unless the class writes them. */
function indexMembers(secondary, has) {
  if (!secondary.length) return [];
  const keys = [];
  const specs = [];
  for (const s of secondary) {
    const [types, key, keyType] = INDEX_KEYS[s.type];
    if (!types.includes(s.fieldType)) {
      fail(s.decorator, `a ${s.type} index keys a field of type ${types.join(" or ")}, not ${s.fieldType}`);
    }
    keys.push(key(`this.${s.member}`));
    specs.push(`new __bor_IndexSpec(${name(s.table, s.decorator, "index table")}, __bor_KeyType.${keyType})`);
  }
  const out = [];
  if (!has("secondaryKeys")) out.push(`secondaryKeys(): __bor_SecondaryKey[] { return [${keys.join(", ")}]; }`);
  if (!has("indexSpecs")) out.push(`indexSpecs(): __bor_IndexSpec[] { return [${specs.join(", ")}]; }`);
  return out;
}

function decodeArgs(params, codec) {
  const reads = params.map((p, i) => `const a${i}: ${p.type} = ${codec.read(p.type, p.node)};`);
  return `const ds = __bor_Datastream.fromActionData(); ${reads.join(" ")} ds.end();`;
}

/** `apply`: an action sent to the contract runs its method (or aborts, unknown); a
 * notification runs the handler for (code, action), the exact contract before "*". */
function dispatcher(className, actions, notifies, codec) {
  const lines = [
    "export function apply(receiver: u64, code: u64, action: u64): void {",
    "  __bor_enter(code);",
    `  const self = new ${className}();`,
    "  if (code == receiver) {",
  ];
  for (const a of actions) {
    const call = `self.${a.method}(${a.params.map((_, i) => `a${i}`).join(", ")})`;
    const run = a.returns === "void"
      ? `${call};`
      : `const result: ${a.returns} = ${call}; const out = new __bor_Datastream(); ${codec.write(a.returns, "result", a.node, "out")} __bor_setReturnValue(out.toBytes());`;
    lines.push(`    if (action == ${a.id}) { ${decodeArgs(a.params, codec)} ${run} return; }`);
  }
  lines.push('    __bor_check(false, "unknown action " + __bor_nameToString(action));');
  lines.push("    return;");
  lines.push("  }");
  const ordered = [...notifies.filter((h) => h.contractId), ...notifies.filter((h) => !h.contractId)];
  for (const h of ordered) {
    const when = h.contractId ? `action == ${h.actionId} && code == ${h.contractId}` : `action == ${h.actionId}`;
    const call = `self.${h.method}(${h.params.map((_, i) => `a${i}`).join(", ")});`;
    lines.push(`  if (${when}) { ${decodeArgs(h.params, codec)} ${call} return; }`);
  }
  lines.push("}");
  return lines.join("\n");
}

/** The ABI as the annotations declare it, checked as it grows. */
class AbiModel {
  constructor() {
    this.structs = new Map();
    this.structsByClass = new Map();
    this.actions = [];
    this.results = [];
    this.tables = [];
    this.events = [];
    this.notify = [];
    this.contract = null;
    this.first = null; // the first class annotation, where a missing @contract is reported
    this.names = new Names();
  }

  addStruct(structName, fields, node) {
    const known = this.structs.get(structName);
    if (known && JSON.stringify(known) !== JSON.stringify(fields)) {
      fail(node, `struct ${structName} is declared twice with different fields (rename a class or action)`);
    }
    this.structs.set(structName, fields);
  }

  addAction(actionName, type, readOnly, result, node) {
    this.names.claim("action", actionName, node);
    const entry = { name: actionName, type };
    if (readOnly) entry.read_only = true;
    this.actions.push(entry);
    if (result) this.results.push({ name: actionName, result_type: result });
  }

  addTable(tableName, type, secondary, node) {
    this.names.claim("table", tableName, node);
    this.tables.push({ name: tableName, type, index_type: "i64", secondary });
  }

  addEvent(eventName, type, node) {
    this.names.claim("event", eventName, node);
    this.events.push({ name: eventName, type });
  }

  json() {
    const abi = {
      version: "bor::abi/1",
      structs: [...this.structs].map(([n, fields]) => ({ name: n, fields })),
      actions: this.actions,
      tables: this.tables,
      events: this.events,
    };
    if (this.results.length) abi.action_results = this.results;
    if (this.notify.length) abi.notify = this.notify;
    return `${JSON.stringify(abi)}\n`;
  }
}

export default class BorContract {
  afterParse(parser) {
    const abi = new AbiModel();
    const rewrites = [];
    for (const source of [...parser.sources]) {
      if (source.sourceKind !== SourceKind.UserEntry && source.sourceKind !== SourceKind.User) continue;
      if (!/@(contract|table|event|action|readonly|on_notify|primary|secondary)\b/.test(source.text)) continue;
      try {
        const text = new SourcePlan(source, abi).rewritten();
        if (text !== null) rewrites.push([source, text]);
      } catch (err) {
        if (!(err instanceof AnnotationError)) throw err;
        parser.error(TRANSFORM_ERROR, err.range, "bor", err.message);
        return;
      }
    }
    if (!rewrites.length) return;
    if (!abi.contract) {
      parser.error(TRANSFORM_ERROR, abi.first.range, "bor",
        "tables and events are declared, but no @contract class: mark the class of the actions @contract");
      return;
    }
    for (const [source, text] of rewrites) {
      parser.sources.splice(parser.sources.indexOf(source), 1);
      parser.donelog.delete(source.internalPath);
      parser.parseFile(text, source.normalizedPath, source.sourceKind === SourceKind.UserEntry);
    }
    const out = process.env.BOR_ABI_OUT;
    if (out) writeFileSync(out, abi.json());
  }
}
