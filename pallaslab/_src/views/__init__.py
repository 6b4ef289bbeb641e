"""Views: records turned into widgets and static HTML. No JAX internals here.

- `tabs/`: one module per inspector tab, each building one view model (its pane)
  from records, typed in `contracts.py` (with the tab's requests and replies);
- the widget renders the models: TypeScript in `labextension/src/widget/`, built into
  `frontend/` (`bundle.py` loads it), typed by `labextension/src/contracts.ts`, which
  `contracts_ts.py` generates from `contracts.py`;
- `static_page.py` and `statichtml/`: the one static renderer, the same models as the
  saved notebook's HTML; `tilesfig.py` draws tile maps statically (the page's pictures
  and `TileMap.save`);
- `grammars.json`: every language's highlighting rules, read by `highlight.py`, the
  widget and the lab extension.
"""
