"""One module per kind of target, each lowering a kernel (or the program) for it.

Each exposes `lower(lowerer, target, kernel)` (the `stablehlo` module: `lower(lowerer,
target)`), dispatched by `engine.Lowerer` on the target's kind and run with the
lowerer's shared results (`share`, `payload`, `site`) and its `finish`: a
`context.LoweringContext`.
"""
