"""``sophon-dsl ui``: the web dashboard over the run store (issue 29; the ``ui`` extra:
Starlette and uvicorn).  :mod:`.data` reads the store, :mod:`.app` serves pages, the JSON
API and server-sent events; the page's script and style are files of this package
(``static/``), so the page makes no request to any other host."""
