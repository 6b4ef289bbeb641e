// Run tab: backend, outputs, and the comparison with the reference.
TABS.run = {
  render(root, data) {
    const r = data.result;
    if (!r) return root.append(h("p", { text: data.message }));
    root.append(h("p", {}, "Ran on ", h("b", { text: r.backend }), " (" + r.mode + ") in " + r.seconds + "."));
    if (r.note) root.append(h("p", { class: "pl-notice", text: r.note }));
    root.append(table(["output", "type", "values", "min", "max", "NaN", "Inf"],
      r.outputs.map((o) => [o.path, o.type, h("code", { text: o.preview }), o.min, o.max,
        String(o.nan), String(o.inf)])));
    const c = r.comparison;
    if (c) {
      const detail = c.problem || ("max abs error " + c.maxAbs + ", max rel error " + c.maxRel +
        ", " + c.mismatched + " element(s) outside rtol=" + c.rtol + " atol=" + c.atol);
      root.append(h("p", { class: "pl-verdict " + (c.ok ? "pl-pass" : "pl-fail") },
        h("b", { text: c.ok ? "\u2713 matches the reference" : "\u2717 does not match the reference" }),
        ": " + detail));
    }
  },
};
