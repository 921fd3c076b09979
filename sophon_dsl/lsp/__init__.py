"""The language server (``sophon-dsl lsp``): :mod:`.server` speaks LSP through pygls,
:mod:`.analysis` answers from the checker's own results (no LSP types there), and
:mod:`.project` holds each project's config and tools.  Needs the ``lsp`` extra."""
