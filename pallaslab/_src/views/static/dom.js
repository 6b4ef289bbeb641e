// DOM helpers. Every string reaches the page as a text node: no HTML parsing, ever.
function h(tag, props, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = String(value);
    else if (key === "title") node.title = String(value);
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key === "dataset") Object.assign(node.dataset, value);
    else node.setAttribute(key, String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function clear(node) {
  while (node.firstChild) node.removeChild(node.firstChild);
  return node;
}

function table(headings, rows) {
  return h("table", { class: "pl-table" },
    h("thead", {}, h("tr", {}, headings.map((x) => h("th", { text: x })))),
    h("tbody", {}, rows.map((cells) => h("tr", {}, cells.map((c) =>
      c instanceof Node ? h("td", {}, c) : h("td", { text: c ?? "" }))))));
}
