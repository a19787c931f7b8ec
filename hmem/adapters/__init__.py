"""The adapters over the library: the ``hmem`` command (``cli*.py``, ``demo.py``,
``progress.py``), the MCP server (``mcp_tools.py`` over ``mcp_stdio.py``) and the opt-in usage
log (``usage.py``). The library never imports them."""
