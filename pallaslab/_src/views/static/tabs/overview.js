// Kernels tab: grid, operands with their BlockSpecs, compiler params.
// Performance hints of one kernel, each with its line and the chip it assumes.
function hintList(hints) {
  const list = h("ul", { class: "pl-hints" });
  for (const hint of hints.hints) {
    const where = hint.location ? hint.location.label + " line " + hint.location.line + ": " : "";
    const figures = hint.figures.map(([name, value]) => name + " " + value).join(" \u00b7 ");
    list.append(h("li", {
      class: "pl-hint pl-hint-" + hint.severity,
      dataset: { hint: hint.id },
      title: figures,
    },
    h("span", { class: "pl-hint-severity", text: hint.severity }),
    " " + where + hint.message + " ",
    h("span", { class: "pl-facts", text: "(assumes " + hint.chip + ")" })));
  }
  if (hints.error) list.append(h("li", { class: "pl-notice", text: hints.error }));
  return list;
}

function hintSection(kernel, ctx) {
  const section = h("div", { class: "pl-hints-section", dataset: { hints: kernel.index } });
  const draw = (hints) => {
    clear(section);
    if (!hints || !(hints.hints.length || hints.error)) {
      if (hints && hints.masks) section.append(h("p", { class: "pl-facts pl-clean", text: "Hints: none." }));
      return;
    }
    section.append(h("h5", { text: "Hints" }), hintList(hints));
  };
  draw(kernel.hints);
  // Masked lanes need the body interpreted for a few programs: asked for after drawing.
  if (kernel.hints && !kernel.hints.masks && ctx && ctx.request) {
    ctx.request({ kind: "hints", kernel: kernel.index }).then((reply) => {
      if (reply && !reply.error && reply.hints) draw(reply);
    });
  }
  return section;
}

TABS.overview = {
  render(root, data, ctx) {
    const program = data.program;
    if (program.args.length || program.outputs.length) {
      root.append(h("p", { class: "pl-program" },
        h("b", { text: program.name }),
        "(" + program.args.map((a) => a.path + ": " + a.type).join(", ") + ") \u2192 " +
        program.outputs.map((o) => o.type).join(", ")));
    }
    if (!data.kernels.length) root.append(h("p", { text: "No Pallas kernels found." }));
    for (const k of data.kernels) {
      const grid = k.grid.length ? k.grid.join(" \u00d7 ") : "()";
      const names = k.gridNames ? " (" + k.gridNames.join(", ") + ")" : "";
      const facts = [
        k.kindText || null,
        "grid " + grid + names + " = " + k.programs + " program" + (k.programs === 1 ? "" : "s"),
        k.source ? "defined at " + k.source.label + " line " + k.source.line : null,
        k.callSite ? "run from " + k.callSite.label + " line " + k.callSite.line : null,
        k.path.length ? "inside " + k.path.join(" \u203a ") : null,
        k.vmapped.length ? "vmapped grid axes " + k.vmapped.join(", ") : null,
      ].filter(Boolean);
      const section = h("section", { class: "pl-kernel", dataset: { kernel: k.index } },
        h("h4", { text: k.name }),
        h("p", { class: "pl-facts", text: facts.join(" \u00b7 ") }),
        table(["role", "ref", "array", "block", "index map", "memory", "block bytes"],
          k.operands.map((o) => [
            h("span", { class: "pl-role pl-role-" + o.role, text: o.role }),
            o.label, o.type, o.block,
            h("code", { text: o.indexMap }),
            o.memory + (o.buffers ? " \u00d7" + o.buffers : ""),
            o.blockBytes,
          ])));
      const extra = [];
      if (k.semantics) extra.push("dimension semantics: " + k.semantics.join(", "));
      if (k.params.length) extra.push("compiler params (" + (k.backend || "?") + "): " +
        k.params.map(([name, value]) => name + "=" + value).join(", "));
      if (k.cost) extra.push("cost estimate: " + k.cost.flops + " flops, " + k.cost.bytes + " bytes");
      if (k.aliases.length) extra.push("input/output aliases: " + k.aliases.map(([i, o]) => i + "\u2192" + o).join(", "));
      if (k.interpret) extra.push("interpret: " + k.interpret);
      for (const line of extra) section.append(h("p", { class: "pl-facts", text: line }));
      // Races under each backend's rules, in words (the conflicts are in k.races[b].conflicts).
      for (const [backend, entry] of Object.entries(k.races || {})) {
        for (const sentence of entry.sentences) {
          section.append(h("p", {
            class: entry.total ? "pl-warning" : (entry.checked ? "pl-facts pl-clean" : "pl-facts"),
            dataset: { races: backend },
            text: sentence,
          }));
        }
      }
      section.append(hintSection(k, ctx));
      root.append(section);
    }
    for (const notice of data.notices) root.append(h("p", { class: "pl-notice", text: notice }));
  },
};
