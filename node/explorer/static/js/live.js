// The chain as the stream tells it: head, LIB and the most recent blocks, kept by one
// stream for the whole page; the page in view registers one listener to redraw itself.
import { call, follow } from "./rpc.js";
import { parseTime } from "./dom.js";

const KEEP = 50; // recent blocks kept, newest first; the rate of transactions is over these
const BACKFILL = 20; // blocks replayed from the store when the page opens

export const live = { info: null, head: null, lib: null, blocks: [], state: "connecting" };
let listener = () => {};

export function onChange(fn) {
  listener = fn;
}

function changed() {
  try {
    listener();
  } catch (err) {
    console.error(err);
  }
}

function frame(f) {
  if (f.type === "block") {
    const b = f.block;
    live.blocks = [b, ...live.blocks.filter((x) => x.num < b.num)].slice(0, KEEP);
    if (!live.head || b.num >= live.head.num) live.head = b;
    if (f.irreversible && (!live.lib || b.num > live.lib.num)) live.lib = { num: b.num, id: b.id };
  } else if (f.type === "lib") {
    live.lib = { num: f.num, id: f.id };
  } else if (f.type === "undo") {
    live.blocks = live.blocks.filter((x) => x.num <= f.cursor.num);
    live.head = live.blocks[0] || null;
  } else if (f.type === "subscribed" && !live.lib) {
    live.lib = f.lib;
  }
  changed();
}

// The status line is a live region: it changes when the stream does, not on every block,
// so a screen reader is not read a number twice a second.
function state(s) {
  if (s === live.state) return;
  live.state = s;
  const line = document.getElementById("live");
  line.className = `live ${s === "live" ? "on" : "off"}`;
  line.textContent = s === "live" ? "Live: following the chain" : "Stream disconnected; reconnecting…";
  changed();
}

export async function start() {
  live.info = await call("/v1/chain/get_info");
  const from = live.info.head_block_num - BACKFILL;
  let cursor = null;
  if (from > 0) {
    const block = await call("/v1/chain/get_block", { block_num_or_id: from });
    cursor = { num: block.block_num, id: block.id };
  }
  live.lib = { num: live.info.last_irreversible_block_num, id: live.info.last_irreversible_block_id };
  follow(cursor, frame, state);
}

// Transactions per second over the blocks kept: those after the oldest, over the time
// from the oldest to the newest.
export function txRate() {
  const [newest] = live.blocks;
  const oldest = live.blocks[live.blocks.length - 1];
  if (!newest || newest === oldest) return null;
  const seconds = (parseTime(newest.timestamp) - parseTime(oldest.timestamp)) / 1000;
  const txs = live.blocks.slice(0, -1).reduce((sum, b) => sum + b.transaction_count, 0);
  return seconds > 0 ? txs / seconds : null;
}
