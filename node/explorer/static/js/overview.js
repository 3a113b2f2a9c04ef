// The overview: head, LIB, finality lag and transactions per second, the recent blocks as
// they come, the producers and their schedules.
import { call } from "./rpc.js";
import { live, txRate } from "./live.js";
import {
  accountLink, blockLink, cards, fields, h, section, short, table,
} from "./dom.js";

const BLOCK_COLUMNS = [["Block"], ["Time (UTC)"], ["Producer"], ["Transactions", "num"], ["Status"]];
const SHOWN = 20;

export async function overview(main) {
  const info = live.info;
  const summary = h("div");
  const recent = h("div");
  main.replaceChildren(
    h("h1", {}, "Chain overview"),
    section("Head and finality", summary,
      fields([["Chain ID", h("code", {}, info.chain_id)], ["Node version", info.server_version]])),
    section("Recent blocks", recent),
  );
  const update = () => {
    summary.replaceChildren(headCards());
    recent.replaceChildren(blocksTable());
  };
  update();
  main.append(await producers());
  return update;
}

function headCards() {
  const head = live.head;
  const lib = live.lib;
  const lag = head && lib ? head.num - lib.num : null;
  const rate = txRate();
  return cards([
    ["Head block", head ? blockLink(head.num) : "—", "head-num"],
    ["Head producer", head ? accountLink(head.producer) : "—", "head-producer"],
    ["Last irreversible", lib ? blockLink(lib.num) : "—", "lib-num"],
    ["Finality lag", lag === null ? "—" : `${lag} block${lag === 1 ? "" : "s"}`, "finality-lag"],
    ["Transactions/s", rate === null ? "—" : rate.toFixed(rate < 10 ? 2 : 0), "tx-rate"],
    ["Head time (UTC)", head ? h("time", { datetime: `${head.timestamp}Z` }, head.timestamp.slice(11, 21)) : "—", "head-time"],
  ]);
}

function blocksTable() {
  const lib = live.lib ? live.lib.num : 0;
  const rows = live.blocks.slice(0, SHOWN).map((b) => [
    blockLink(b.num),
    h("time", { datetime: `${b.timestamp}Z`, title: b.timestamp.replace("T", " ") }, b.timestamp.slice(11, 21)),
    accountLink(b.producer),
    String(b.transaction_count),
    b.num <= lib ? h("span", { class: "final" }, "final") : h("span", { class: "reversible" }, "reversible"),
  ]);
  const caption = live.state === "live" ? "Newest first, live from the stream" : "Newest first (stream reconnecting)";
  return table(caption, BLOCK_COLUMNS, rows, "recent-blocks");
}

async function producers() {
  const answer = await call("/v1/chain/get_producers", { limit: 100 });
  const columns = [["Producer"], ["Registered"], ["In schedule"], ["Voted stake", "num"], ["Signing key"]];
  const rows = answer.rows.map((p) => [
    accountLink(p.owner),
    p.registered ? "yes" : "no",
    p.in_schedule ? "yes" : "no",
    String(p.voted_stake),
    h("code", { title: p.producer_key }, short(p.producer_key, 16)),
  ]);
  const schedule = (s, what) =>
    s ? h("p", {}, `${what} (version ${s.version}): `,
      s.producers.flatMap((p, i) => [i ? " → " : "", accountLink(p.producer_name)])) : null;
  return section("Producers and schedule",
    schedule(answer.active, "Active schedule"),
    answer.pending ? schedule(answer.pending, "Pending schedule") : h("p", {}, "No schedule change pending."),
    table("Candidates by votes, most first", columns, rows, "producers"));
}

