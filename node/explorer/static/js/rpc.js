// The node's public RPC and stream, addressed relative to the page (/explorer/ -> /v1/...),
// so the explorer works behind a proxy that serves the node under a path of its own.

export class RpcError extends Error {
  constructor(status, name, what) {
    super(what);
    this.status = status;
    this.name = name;
  }
}

const root = () => new URL("..", window.location.href);

export async function call(path, body = {}) {
  const response = await fetch(new URL(path.replace(/^\//, ""), root()), {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
  const answer = await response.json().catch(() => ({}));
  if (!response.ok) {
    const error = answer.error || {};
    throw new RpcError(response.status, error.name || "http", error.what || response.statusText);
  }
  return answer;
}

// The blocks stream from `cursor` (null: from the head), reopened from the last cursor
// after a drop or a `lagged`. onFrame gets each frame; onState "live" or "reconnecting".
// Returns a function that closes it for good.
export function follow(cursor, onFrame, onState) {
  let socket = null;
  let stopped = false;
  let last = cursor;
  const open = () => {
    const url = new URL("v1/chain/stream", root());
    url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
    socket = new WebSocket(url);
    socket.onopen = () =>
      socket.send(JSON.stringify({ type: "subscribe", stream: "blocks", cursor: last }));
    socket.onmessage = (message) => {
      const frame = JSON.parse(message.data);
      if (frame.cursor) last = frame.cursor;
      if (frame.type === "subscribed") onState("live");
      onFrame(frame);
    };
    socket.onclose = () => {
      if (stopped) return;
      onState("reconnecting");
      setTimeout(open, 2000);
    };
  };
  open();
  return () => {
    stopped = true;
    socket.close();
  };
}

// The actions of block `num` as the node's `actions` stream gives them: contract arguments
// and events decoded by the contract's ABI, and each action's console. The stream is
// opened from the block before and closed after the first frame; null if it does not come
// within `ms` (the page then shows the transaction as get_transaction has it).
export async function actionsOf(num, ms = 5000) {
  if (num < 2) return null;
  const before = await call("/v1/chain/get_block", { block_num_or_id: num - 1 });
  return new Promise((resolve) => {
    const url = new URL("v1/chain/stream", root());
    url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
    const socket = new WebSocket(url);
    const done = (value) => {
      clearTimeout(timer);
      socket.close();
      resolve(value);
    };
    const timer = setTimeout(() => done(null), ms);
    socket.onopen = () => socket.send(JSON.stringify({
      type: "subscribe", stream: "actions", cursor: { num: before.block_num, id: before.id },
    }));
    socket.onmessage = (message) => {
      const frame = JSON.parse(message.data);
      if (frame.type === "actions") done(frame.block.num === num ? frame.actions : []);
      else if (frame.type !== "subscribed") done(null);
    };
    socket.onerror = () => done(null);
  });
}
