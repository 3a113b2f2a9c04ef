// An account (balance, stake, votes, key) and a contract (its ABI's actions and tables, and
// a table's rows decoded by that ABI through get_table_rows).
import { call } from "./rpc.js";
import { accountLink, fields, h, json, section, table } from "./dom.js";

export async function account(main, name) {
  const a = await call("/v1/chain/get_account", { account_name: name });
  const abi = await call("/v1/chain/get_abi", { account: name }).catch(() => ({ abi: null }));
  const unbonding = a.unbonding.length ? json(a.unbonding) : "none";
  const voter = a.voter_info || {};
  main.replaceChildren(
    h("h1", {}, `Account ${a.account_name}`),
    section("Balance", fields([
      ["Liquid balance", h("span", { id: "balance" }, a.core_liquid_balance)],
      ["Staked", String(a.staked)],
      ["Unbonding", unbonding],
    ])),
    section("Votes and role", fields([
      ["Votes for", voter.producers && voter.producers.length
        ? voter.producers.flatMap((p, i) => [i ? ", " : "", accountLink(p)]) : "nobody"],
      ["Producer", a.producer ? json(a.producer) : "no"],
      ["Contract", abi.abi ? h("a", { href: `#/contract/${name}` }, "actions and tables") : "none deployed"],
    ])),
    section("Key", fields([["Public key", h("code", {}, a.permissions[0].required_auth.keys[0].key)]])),
  );
}

export function pick(main, go) {
  const input = h("input", { id: "contract-name", name: "contract", required: true, autocomplete: "off" });
  main.replaceChildren(
    h("h1", {}, "Contracts"),
    h("p", {}, "A contract lives on an account: name the account to see its actions and tables."),
    h("form", { class: "inline", onsubmit: (e) => { e.preventDefault(); go(`#/contract/${input.value.trim()}`); } },
      h("label", { for: "contract-name" }, "Account", input), h("button", { type: "submit" }, "Show")),
  );
}

export async function contract(main, name) {
  const answer = await call("/v1/chain/get_abi", { account: name });
  const abi = answer.bor_abi;
  main.replaceChildren(h("h1", {}, `Contract ${name}`));
  if (!abi) {
    main.append(h("p", {}, `No contract with an ABI is deployed on ${name}.`));
    return;
  }
  const structs = new Map(abi.structs.map((s) => [s.name, s]));
  const shape = (type) => (structs.get(type)?.fields || []).map((f) => `${f.name}: ${f.type}`).join(", ");
  main.append(
    section("Actions", table(`Actions of ${name}`, [["Action"], ["Arguments"]],
      abi.actions.map((a) => [h("code", {}, a.name), shape(a.type)]), "contract-actions")),
    section("Tables", table(`Tables of ${name}`, [["Table"], ["Row"], ["Key"], ["Secondary index"]],
      abi.tables.map((t) => [h("code", {}, t.name), shape(t.type), t.index_type,
        (t.secondary || []).map((s) => `${s.name} (${s.type})`).join(", ") || "—"]), "contract-tables")),
    ...(abi.events || []).length ? [section("Events", table(`Events ${name} emits`, [["Event"], ["Fields"]],
      abi.events.map((e) => [h("code", {}, e.name), shape(e.type)])))] : [],
  );
  for (const t of abi.tables) main.append(rows(name, t, structs));
}

// One table's rows, a page at a time, in the scope the visitor chooses (the contract's own
// name first: contracts most often keep their rows there).
function rows(code, t, structs) {
  const columns = (structs.get(t.type)?.fields || []).map((f) => [f.name]);
  const id = `rows-${t.name.replace(/[^a-z0-9]/g, "-")}`;
  const scope = h("input", { id: `${id}-scope`, value: code, required: true });
  const out = h("div", { "aria-live": "polite" });
  let next = "";
  const load = async (more) => {
    try {
      const page = await call("/v1/chain/get_table_rows", {
        code, scope: scope.value.trim(), table: t.name, json: true, limit: 20, lower_bound: more ? next : "",
      });
      next = page.more ? page.next_key : "";
      const body = page.rows.map((r) => columns.map(([c]) => format(r[c])));
      const shown = table(`Rows of ${t.name} in scope ${scope.value.trim()}`, columns, body, id);
      out.replaceChildren(shown, page.more ? h("button", { type: "button", onclick: () => load(true) }, "Next rows") : "");
      if (!page.rows.length) out.replaceChildren(h("p", {}, "No rows in this scope."));
    } catch (err) {
      out.replaceChildren(h("p", { class: "error", role: "alert" }, err.message));
    }
  };
  const form = h("form", { class: "inline", onsubmit: (e) => { e.preventDefault(); load(false); } },
    h("label", { for: scope.id }, "Scope", scope), h("button", { type: "submit" }, "Show rows"));
  load(false);
  return section(`Rows of ${t.name}`, form, out);
}

function format(value) {
  return typeof value === "object" && value !== null ? JSON.stringify(value) : String(value);
}

