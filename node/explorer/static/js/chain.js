// A block and a transaction, as get_block and get_transaction answer them.
import { actionsOf, call } from "./rpc.js";
import { accountLink, blockLink, fields, h, json, section, table, txLink, when } from "./dom.js";

export async function block(main, numOrId) {
  const b = await call("/v1/chain/get_block", { block_num_or_id: numOrId });
  const qc = b.qc_claim ? `block #${b.qc_claim.block_num}${b.qc_claim.strong ? ", strong" : ", weak"}` : null;
  const columns = [["Transaction"], ["Actions"], ["Status"]];
  const rows = b.transactions.map((t) => [txLink(t.id), t.actions.map(summary).join("; "), t.status]);
  main.replaceChildren(
    h("h1", {}, `Block #${b.block_num}`),
    section("Header", fields([
      ["Number", String(b.block_num)],
      ["ID", h("code", {}, b.id)],
      ["Previous", b.block_num > 1 ? h("a", { href: `#/block/${b.block_num - 1}`, class: "mono" }, b.previous) : h("code", {}, b.previous)],
      ["Next", h("a", { href: `#/block/${b.block_num + 1}` }, `#${b.block_num + 1}`)],
      ["Time", when(b.timestamp)],
      ["Producer", accountLink(b.producer)],
      ["Status", b.irreversible ? h("span", { class: "final" }, "irreversible") : h("span", { class: "reversible" }, "reversible")],
      ["Schedule version", String(b.schedule_version)],
      ["QC claim", qc],
      ["Transaction root", h("code", {}, b.transaction_mroot)],
      ["State root", h("code", {}, b.state_root)],
    ])),
    section(`Transactions (${rows.length})`,
      rows.length ? table(`The transactions of block #${b.block_num}`, columns, rows, "block-transactions")
        : h("p", {}, "This block holds no transactions.")),
  );
}

// One line for an action: a transfer as who pays whom, a contract call as contract.action.
export function summary(a) {
  const d = a.data || {};
  if (a.action === "transfer") return `transfer ${d.sender} → ${d.recipient} ${d.amount}${d.memo ? ` "${d.memo}"` : ""}`;
  if (a.action === "call") return `${d.contract}.${d.action_name} by ${(d.authorization || []).join(", ")}`;
  if (a.action === "setcode") return `setcode on ${d.account}`;
  return a.action;
}

export async function transaction(main, id) {
  const t = await call("/v1/chain/get_transaction", { id });
  const traced = t.block_num ? await actionsOf(t.block_num).catch(() => null) : null;
  const mine = (traced || []).filter((a) => a.tx_id === t.id);
  const actions = t.actions.map((a, i) => {
    const trace = mine.find((x) => x.index === i && x.depth === 0);
    const notified = mine.filter((x) => x.index === i && x.depth > 0);
    return h("div", { class: "action" },
      h("h3", {}, `${i + 1}. ${summary(a)}`),
      trace && a.action === "call" ? decoded(trace) : json(shorten(a.data)),
      notified.length ? h("p", {}, "Notified: ", notified.map((x) => x.receiver).join(", ")) : null);
  });
  main.replaceChildren(
    h("h1", {}, "Transaction"),
    section("Summary", fields([
      ["ID", h("code", { id: "tx-id" }, t.id)],
      ["Status", t.status],
      ["Block", t.block_num ? blockLink(t.block_num) : "not yet in a block"],
      ["Expires", when(new Date(t.expiration * 1000).toISOString().slice(0, 19))],
      ["Reference block", `#${t.ref_block_num} (prefix ${t.ref_block_prefix})`],
      ["Signatures", t.signatures.map((s) => h("code", {}, s.slice(0, 24), "… "))],
    ])),
    section(`Actions (${t.actions.length})`, actions),
  );
}

// A contract call as the node's actions stream decodes it by the contract's ABI.
function decoded(trace) {
  const events = trace.events || [];
  return fields([
    ["Arguments", trace.data === null ? h("code", {}, trace.hex) : json(trace.data)],
    ["Console", trace.console ? h("pre", {}, trace.console) : null],
    ["Events", events.length ? events.map((e) => [h("h4", {}, e.name), json(e.data ?? e.hex)]) : null],
  ]);
}

// Contract code in a setcode is long hex: its length says more than its bytes.
function shorten(data) {
  if (!data || typeof data.code !== "string" || data.code.length < 200) return data;
  return { ...data, code: `${data.code.slice(0, 64)}… (${data.code.length / 2} bytes)` };
}

