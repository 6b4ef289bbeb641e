"""The lowest layer: utilities every layer may use, importing nothing of pallaslab's.

`messages` (one-line error texts), `sources` (source files and cell labels),
`textscan` and `textdiff` (text helpers), `paths` (the cache directory), `display`
(how records reach the screen without importing a view), `version`.
"""
