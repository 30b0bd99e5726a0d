"""`ipyskills mcp`: the agent tools and the MCP Skills extension, served to any MCP client.

Nothing here is imported by `import ipyskills`; the `mcp` SDK is loaded only when a server is built
(`pip install 'ipyskills[mcp]'`). See server.py (tools and resources), skills_ext.py (SEP-2640),
http.py (Streamable HTTP with a bearer token), stdio.py (the stdio transport and its clean-up) and
config.py (client configuration).
"""
