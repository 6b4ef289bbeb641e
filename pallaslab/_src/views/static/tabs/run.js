// Run tab: backend, outputs, and the comparison with the reference.
TABS.run = {
  render(root, data) {
    const r = data.result;
    if (!r) return root.append(h("p", { text: data.message }));
    root.append(h("p", {}, "Ran on ", h("b", { text: r.backend }), " (" + r.mode + ") in " + r.seconds + "."));
    if (r.note) root.append(h("p", { class: "pl-notice", text: r.note }));
    for (const line of r.notices || []) root.append(h("p", { class: "pl-facts", text: line }));
    for (const leak of r.leaks || []) {
      const where = leak.where ? leak.where.label + " line " + leak.where.line + ": " : "";
      root.append(h("p", { class: "pl-warning" }, h("b", { text: "Padding leak" }), " \u2014 " + where + leak.text));
    }
    for (const check of r.raceChecks || []) {
      root.append(h("p", { class: check.confirmed ? "pl-warning" : "pl-facts" },
        check.confirmed ? h("b", { text: "Race (" + check.backend.toUpperCase() + ")" }) : "",
        (check.confirmed ? " \u2014 " : "") + check.text));
    }
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
