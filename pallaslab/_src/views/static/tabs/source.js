// Source tab: the code the kernels come from, kernel and BlockSpec lines marked.
TABS.source = {
  render(root, data) {
    if (!data.files.length) root.append(h("p", { text: "No source is available for these kernels." }));
    for (const file of data.files) {
      const view = new CodeView({ lines: file.lines, first: file.first, language: "python",
        marks: file.marks, title: file.label });
      root.append(view.el);
    }
  },
};
