"""Views: records turned into widgets and static HTML. No JAX internals here."""
