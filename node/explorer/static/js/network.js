// Peers and sync state, from the public /v1/net/peers, /v1/node/sync and /v1/node/health.
import { call } from "./rpc.js";
import { fields, h, section, short, table } from "./dom.js";

export async function network(main) {
  const [peers, sync, health] = await Promise.all([
    call("/v1/net/peers"), call("/v1/node/sync"), call("/v1/node/health"),
  ]);
  const columns = [["Peer"], ["Address"], ["Direction"], ["Transport"], ["Head", "num"], ["LIB", "num"], ["RTT ms", "num"]];
  const rows = peers.peers.map((p) => [
    h("code", {}, short(p.peer, 16)), p.address, p.direction, p.transport,
    String(p.head), String(p.lib), p.rtt_ms === null ? "—" : String(p.rtt_ms),
  ]);
  const dialing = peers.dialing || [];
  main.replaceChildren(
    h("h1", {}, "Peers and sync"),
    section("This node", fields([
      ["Node ID", h("code", {}, peers.node_id)],
      ["Health", `${health.status}, head #${health.head_block_num} ${health.head_age_s.toFixed(1)} s old`],
    ])),
    section("Sync", fields([
      ["Stage", h("span", { id: "sync-stage" }, sync.stage)],
      ["Head / LIB / target", `#${sync.head} / #${sync.lib} / #${sync.target}`],
      ["Blocks per second", String(sync.blocks_per_s)],
      ["Transactions per second", String(sync.txs_per_s)],
      ["Time left", sync.eta_s === null ? "—" : `${Math.round(sync.eta_s)} s`],
      ["Peers", String(sync.peers)],
    ])),
    section(`Peers (${rows.length})`,
      rows.length ? table("Connected peers", columns, rows, "peers") : h("p", {}, "No peers connected.")),
    section("Dialled, not connected",
      dialing.length ? table("Addresses this node dials", [["Address"], ["State"], ["Last error"]],
        dialing.map((d) => [d.address, d.state, d.error || "—"])) : h("p", {}, "None.")),
  );
}
