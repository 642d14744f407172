"""Endpoints (virtual servers): curated slices of the catalog served at ``/mcp/{name}``,
``/sse/{name}`` and over stdio (issue 18). ``config`` is the section's model, ``selection`` the
pure selection, ``view`` the endpoint's catalog view, ``host`` what sessions and transports of an
endpoint are served by, ``search`` the ``discovery: search`` mode, ``http`` the routes."""
