// The inspector: a header, a tab bar and one pane; panes arrive from Python lazily,
// each in its own trait ("pane_<tab id>"), so building one sends that pane alone.
function renderProblem(problem) {
  return h("div", { class: "pl-problem", role: "alert" },
    h("b", { text: problem.where ? problem.where + ": " : "" }),
    h("span", { text: problem.summary }),
    problem.hint ? h("div", { class: "pl-hint", text: problem.hint }) : null);
}

function renderHeader(header) {
  const badges = [header.backend + (header.mode ? " \u00b7 " + header.mode : "")];
  badges.push(header.kernels.length + " kernel" + (header.kernels.length === 1 ? "" : "s"));
  const check = header.check === null ? null : h("span", {
    class: "pl-badge " + (header.check ? "pl-pass" : "pl-fail"),
    text: header.check ? "\u2713 matches reference" : "\u2717 differs from reference" });
  return h("div", { class: "pl-header" },
    h("span", { class: "pl-brand", text: "pallaslab" }),
    h("span", { class: "pl-title", text: header.name }),
    badges.map((b) => h("span", { class: "pl-badge", text: b })),
    check);
}

function render({ model, el }) {
  const root = h("div", { class: "pallaslab" });
  const state = {};
  // Tabs ask Python for more data with ctx.request(body): a promise of the reply.
  const pending = new Map();
  let nextRequest = 1;
  const onMessage = (msg) => {
    if (!msg || msg.id === undefined || !pending.has(msg.id)) return;
    pending.get(msg.id)(msg.reply);
    pending.delete(msg.id);
  };
  model.on("msg:custom", onMessage);
  // A kernel that is gone never answers: such requests end with an error reply.
  const requester = (tab) => (body, timeoutMs = 120000) => new Promise((resolve) => {
    const id = nextRequest++;
    const timer = setTimeout(() => {
      pending.delete(id);
      resolve({ error: "the kernel did not answer (is it running?)" });
    }, timeoutMs);
    pending.set(id, (reply) => { clearTimeout(timer); resolve(reply); });
    model.send({ tab, id, body });
  });
  const bar = h("div", { class: "pl-tabs", role: "tablist" });
  const pane = h("div", { class: "pl-body", role: "tabpanel" });

  const draw = () => {
    clear(root);
    root.append(renderHeader(model.get("header")));
    const problem = model.get("problem");
    if (problem) root.append(renderProblem(problem));
    clear(bar);
    const selected = model.get("selected");
    for (const tab of model.get("tabs")) {
      bar.append(h("button", {
        class: "pl-tab" + (tab.id === selected ? " pl-selected" : ""),
        role: "tab", "aria-selected": tab.id === selected ? "true" : "false",
        dataset: { tab: tab.id }, text: tab.title,
        onclick: () => { model.set("selected", tab.id); model.save_changes(); },
      }));
    }
    root.append(bar, pane);
    drawPane();
  };

  const drawPane = () => {
    clear(pane);
    const id = model.get("selected");
    const data = model.get("pane_" + id);
    pane.dataset.tab = id;
    if (data === undefined || data === null) return pane.append(h("p", { class: "pl-loading", text: "Loading\u2026" }));
    if (data.error) return pane.append(h("p", { class: "pl-problem", text: data.error }));
    const renderer = TABS[id];
    if (!renderer) return pane.append(h("p", { text: "This tab needs a newer pallaslab front end." }));
    try {
      renderer.render(pane, data, { model, state, request: requester(id) });
    } catch (err) {
      pane.append(h("p", { class: "pl-problem", text: "Could not draw this tab: " + err }));
    }
  };

  // A pane that arrives (or is dropped to keep the widget's state small) redraws
  // only when it is the one shown.
  const onPaneOf = (model.get("tabs") || []).map((tab) => {
    const handler = () => { if (tab.id === model.get("selected")) drawPane(); };
    model.on("change:pane_" + tab.id, handler);
    return ["change:pane_" + tab.id, handler];
  });
  model.on("change:selected", draw);
  model.on("change:header", draw);
  model.on("change:problem", draw);
  draw();
  el.append(root);
  return () => {
    model.off("msg:custom", onMessage);
    for (const [event, handler] of onPaneOf) model.off(event, handler);
    model.off("change:selected", draw);
    model.off("change:header", draw);
    model.off("change:problem", draw);
  };
}

export default { render };
