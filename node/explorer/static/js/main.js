// The explorer's entry: hash routes (#/block/12, #/tx/<id>, #/account/<name>, …), the
// search box, and the one stream every page shares.
import { account, contract, pick } from "./account.js";
import { block, transaction } from "./chain.js";
import { h, problem } from "./dom.js";
import { live, onChange, start } from "./live.js";
import { network } from "./network.js";
import { overview } from "./overview.js";
import { call } from "./rpc.js";

const main = document.getElementById("main");
const go = (hash) => {
  window.location.hash = hash;
};

const ROUTES = [
  [/^\/?$/, () => overview(main), "Overview"],
  [/^\/block\/([^/]+)$/, (x) => block(main, /^\d+$/.test(x) ? Number(x) : x), "Block"],
  [/^\/tx\/([0-9a-fA-F]+)$/, (id) => transaction(main, id), "Transaction"],
  [/^\/account\/([^/]+)$/, (name) => account(main, name), "Account"],
  [/^\/contract\/?$/, () => pick(main, go), "Contracts"],
  [/^\/contract\/([^/]+)$/, (name) => contract(main, name), "Contract"],
  [/^\/network$/, () => network(main), "Peers and sync"],
];

let shown = 0; // counts routings, so a slow page does not draw over a newer one

async function route(focus) {
  const path = decodeURIComponent(window.location.hash.replace(/^#/, ""));
  const turn = ++shown;
  onChange(() => {});
  for (const [pattern, render, title] of ROUTES) {
    const match = pattern.exec(path);
    if (!match) continue;
    document.title = `${title} · BoR explorer`;
    try {
      const update = await render(...match.slice(1));
      if (turn === shown && typeof update === "function") onChange(update);
    } catch (err) {
      const what = err.status === 404 ? "not found" : "not shown";
      if (turn === shown) main.replaceChildren(h("h1", {}, `${title} ${what}`), problem(err));
    }
    if (focus && turn === shown) main.focus();
    return;
  }
  main.replaceChildren(h("h1", {}, "No such page"), h("p", {}, h("a", { href: "#/" }, "Back to the overview")));
}

// A number is a block; 64 hex digits a transaction id, else a block id; anything else an
// account name.
async function search(text) {
  const q = text.trim();
  if (/^\d+$/.test(q)) return go(`#/block/${q}`);
  if (/^[0-9a-fA-F]{64}$/.test(q)) {
    const id = q.toLowerCase();
    const found = await call("/v1/chain/get_transaction", { id }).then(() => true, () => false);
    return go(found ? `#/tx/${id}` : `#/block/${id}`);
  }
  return go(`#/account/${q.toLowerCase()}`);
}

document.getElementById("search").addEventListener("submit", (event) => {
  event.preventDefault();
  search(event.target.elements.q.value);
});
window.addEventListener("hashchange", () => route(true));

start().then(() => route(false), (err) => {
  main.replaceChildren(h("h1", {}, "The node does not answer"), problem(err));
  live.state = "down";
});
