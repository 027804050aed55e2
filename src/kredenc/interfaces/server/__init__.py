"""``kredenc serve``: one process that owns the store and serves it to programs and people.

* ``app.py``: :func:`create_app`, the FastAPI application (the routers of ``routes/``,
  the guard, the error handlers, the proxy at ``/v1``, MCP at ``/mcp``, the page at ``/``).
* ``state.py``: :class:`ServerState`, what every route shares (the owner handle, one view
  per tenant, the config, the ingest jobs).
* ``deps.py``: the FastAPI dependencies a route takes (the caller's tenant and view).
* ``errors.py``: the one JSON error shape and the mapping of kredenc's errors to statuses.
* ``routes/``: one router per area of the facade.
* ``web/``: the page (static files; no build step).

Install with ``pip install 'kredenc[server]'``; see docs/server.md.
"""
