"""The one static renderer: view models to self-contained HTML for saved notebooks.

As treescope does, rendering goes records -> view models (the tabs', also the
widget's) -> renderable parts (`nodes.Node`, built by `panes`) -> one HTML string
(`nodes.to_html`), every text escaped there and nowhere else. Styles are inline
(`nodes.STYLES`, by class): front ends that sanitize HTML (an untrusted notebook in
JupyterLab) drop `<style>` and `<svg>` but keep inline styles and images, so the
page reads the same trusted or not.
"""
