// Kernels tab: grid, operands with their BlockSpecs, compiler params.
TABS.overview = {
  render(root, data) {
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
      root.append(section);
    }
    for (const notice of data.notices) root.append(h("p", { class: "pl-notice", text: notice }));
  },
};
