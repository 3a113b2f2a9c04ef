// Building the page from data: every text goes in as a text node, never as markup, so
// nothing the chain holds (memos, names, table rows) can become HTML or script.

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

export const link = (href, text) => h("a", { href }, text);
export const blockLink = (num) => link(`#/block/${num}`, `#${num}`);
export const accountLink = (name) => link(`#/account/${name}`, name);
export const txLink = (id, full = false) =>
  h("a", { href: `#/tx/${id}`, class: "mono", title: id }, full ? id : short(id));
export const short = (hex, n = 12) => (hex.length > n ? `${hex.slice(0, n)}…` : hex);

// A table with a caption and column headers, in a box of its own that scrolls sideways on a
// narrow screen rather than widening the page. columns: [name, "num"?].
export function table(caption, columns, rows, id = null) {
  const head = h("tr", {}, columns.map(([name, kind]) => h("th", { scope: "col", class: kind }, name)));
  const body = h("tbody", {}, rows.map((cells) => row(columns, cells)));
  return h("div", { class: "scroll" },
    h("table", { id }, h("caption", {}, caption), h("thead", {}, head), body));
}

export function row(columns, cells) {
  return h("tr", {}, cells.map((cell, i) => h("td", { class: columns[i]?.[1] }, cell)));
}

// A description list of [term, value] pairs; null values are left out.
export function fields(pairs, className = "fields") {
  return h("dl", { class: className },
    pairs.filter(([, v]) => v !== null && v !== undefined)
      .map(([term, value]) => [h("dt", {}, term), h("dd", {}, value)]));
}

export function cards(pairs) {
  return h("dl", { class: "cards" },
    pairs.map(([term, value, id]) => h("div", {}, h("dt", {}, term), h("dd", { id }, value))));
}

export function section(title, ...children) {
  const id = `s-${title.toLowerCase().replace(/[^a-z0-9]+/g, "-")}`;
  return h("section", { "aria-labelledby": id }, h("h2", { id }, title), ...children);
}

// The chain's timestamps are UTC without a zone letter.
export const parseTime = (ts) => Date.parse(ts.endsWith("Z") ? ts : `${ts}Z`);
export const when = (ts) => h("time", { datetime: `${ts}Z` }, ts.replace("T", " "));

export function json(value) {
  return h("pre", {}, JSON.stringify(value, null, 2));
}

export function problem(err) {
  return h("p", { class: "error", role: "alert" }, err.message || String(err));
}
