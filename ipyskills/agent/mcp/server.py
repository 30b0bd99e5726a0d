"""An MCP server over one registry's agent view: the agent tools, and the Skills extension (SEP-2640).

`build_server(registry, ...)` returns an `mcp.server.lowlevel.Server` whose

- tools are exactly the agent view's (`view.tool_schemas("anthropic")`: the same names, descriptions and
  JSON Schemas `for_agent()` gives any other agent), and whose `tools/call` is `view.dispatch`: the first
  content item is the very text `dispatch` returns, `isError` its `is_error`. Calls run in worker threads,
  so several can be in flight at once; a call never raises into the SDK (dispatch answers every mistake
  with its own "Error: ..." text).
- files written by a script come back after that text as embedded resources
  (`ipyskills-artifact://<run>/<path>`), each at most `ARTIFACT_CAP` bytes and `ARTIFACTS_TOTAL_CAP` in
  all; one that does not fit is named in a closing text item instead.
- resources are the visible skills' files at `skill://<name>/<path>`, and `skills/list` / `skills/get` are
  served as custom request methods (the SDK has no Skills extension yet; see skills_ext.py), with the
  extension declared under `capabilities.extensions["io.modelcontextprotocol/skills"]`.

Only public names of ipyskills are used: a registry, its `for_agent` view (`names`, `tool_schemas`,
`dispatch`, `system_prompt`) and `SkillError`.
"""

from __future__ import annotations

import base64
import itertools
import logging
import sys
import threading
from typing import Any
from urllib.parse import quote

from ...errors import SkillError

log = logging.getLogger(__name__)

SERVER_NAME = "ipyskills"
ARTIFACT_CAP = 1024 * 1024  # bytes of one file embedded in a tool result
ARTIFACTS_TOTAL_CAP = 4 * 1024 * 1024  # bytes of all files embedded in one tool result
MAX_CONCURRENT_CALLS = 4  # tool calls running at once; more wait their turn
ARTIFACT_SCHEME = "ipyskills-artifact"


def require_sdk():
    """The `mcp` package, or a SkillError saying how to get it."""
    try:
        import mcp
        import mcp.server.lowlevel  # noqa: F401
    except ImportError as exc:
        raise SkillError("the MCP server needs the MCP Python SDK, which is not installed: "
                         "pip install 'ipyskills[mcp]'") from exc


class _Recorder:
    """The registry as the view sees it, keeping the ExecuteResult of the last run of each thread so the
    server can return the run's files; everything else is the registry's own."""

    def __init__(self, registry):
        self._registry = registry
        self._local = threading.local()

    def __getattr__(self, name):
        return getattr(self._registry, name)

    def run(self, *args, **kwargs):
        result = self._registry.run(*args, **kwargs)
        self._local.result = result
        return result

    def take_result(self):
        result = getattr(self._local, "result", None)
        self._local.result = None
        return result


def make_view(registry, allow=None, disabled=(), enabled=(), **options):
    """The agent view the server serves: `registry.for_agent(allow, disabled, **options)` without activation
    tracking (one server answers many conversations, so every call is stateless, like `dispatch`);
    `enabled`: names to `view.enable` (skills whose SKILL.md sets disable-model-invocation)."""
    options.setdefault("track_activations", False)
    recorder = _Recorder(registry)
    # for_agent of the registry's own class, bound to the recorder: the view's runs pass through it.
    view = type(registry).for_agent(recorder, allow, disabled, **options)
    for name in enabled:
        if name in registry and (view.allow is None or registry.get(name).name in view.allow):
            view.enable(name)
    return view, recorder


class Service:
    """What the MCP handlers call: one view, its skill files, and the runs in flight."""

    def __init__(self, registry, allow=None, disabled=(), enabled=(), **options):
        from .skills_ext import SkillFiles

        self.registry = registry
        self.view, self._recorder = make_view(registry, allow, disabled, enabled, **options)
        self.files = SkillFiles(self.view)
        self._runs = itertools.count(1)
        self._lock = threading.Lock()
        self.in_flight = 0

    def call(self, name: str, arguments: Any):
        """(ToolResult, ExecuteResult or None) for one tool call, in the calling thread."""
        with self._lock:
            self.in_flight += 1
        try:
            self._recorder.take_result()
            result = self.view.dispatch(name, arguments)
            return result, self._recorder.take_result()
        finally:
            with self._lock:
                self.in_flight -= 1

    def artifact_content(self, run) -> list:
        """Embedded resources for a run's files, within the caps, and a note naming any left out."""
        import mcp_types as types

        if run is None or not getattr(run, "artifacts", None):
            return []
        number = next(self._runs)
        content, left_out, total = [], [], 0
        for artifact in run.artifacts:
            data = artifact.data
            if data is None or len(data) > ARTIFACT_CAP or total + len(data) > ARTIFACTS_TOTAL_CAP:
                left_out.append(artifact.path)
                continue
            total += len(data)
            uri = f"{ARTIFACT_SCHEME}://run-{number}/{quote(artifact.path, safe='/')}"
            mime = getattr(artifact, "mime", None) or "application/octet-stream"
            try:
                text = data.decode("utf-8") if _textual(mime, artifact.path) else None
            except UnicodeDecodeError:
                text = None
            resource = (types.TextResourceContents(uri=uri, mime_type=mime, text=text) if text is not None
                        else types.BlobResourceContents(uri=uri, mime_type=mime,
                                                        blob=base64.b64encode(data).decode("ascii")))
            content.append(types.EmbeddedResource(resource=resource))
        if left_out:
            content.append(types.TextContent(text=(
                f"[ipyskills: not embedded here (over {ARTIFACT_CAP:,} bytes each or {ARTIFACTS_TOTAL_CAP:,} "
                f"in all): {', '.join(left_out)}]")))
        return content


def _textual(mime: str, path: str) -> bool:
    return mime.startswith("text/") or mime in ("application/json", "application/xml") or \
        path.endswith((".csv", ".md", ".txt", ".json", ".svg"))


def build_server(registry, allow=None, disabled=(), *, enabled=(), instructions: bool = True, **options):
    """An `mcp.server.lowlevel.Server` serving `registry` through `registry.for_agent(allow, disabled,
    **options)` (`enabled`: see make_view); its `.ipyskills` attribute is the Service (view, files, runs
    in flight). `instructions`: give the client the view's system prompt (skills and how to use the
    tools) as the server's instructions, as of now."""
    require_sdk()
    import anyio
    import mcp_types as types
    from mcp.server.lowlevel import Server
    from mcp.shared.exceptions import MCPError

    from .skills_ext import EXTENSION_ID

    # the package is always loaded before any of its modules: read its version without importing the root
    # layer (the agent layer sits below it)
    __version__ = sys.modules["ipyskills"].__version__

    service = Service(registry, allow, disabled, enabled, **options)
    limiter = anyio.CapacityLimiter(MAX_CONCURRENT_CALLS)

    async def list_tools(ctx, params):
        return types.ListToolsResult(tools=[
            types.Tool(name=spec["name"], description=spec["description"], input_schema=spec["input_schema"])
            for spec in service.view.tool_schemas("anthropic")])

    async def call_tool(ctx, params):
        # abandon_on_cancel: a client that goes away does not wait for the run; the process's clean-up
        # (serve_stdio, or the sandbox's own deadline) ends it.
        result, run = await anyio.to_thread.run_sync(service.call, params.name, dict(params.arguments or {}),
                                                     abandon_on_cancel=True, limiter=limiter)
        content = [types.TextContent(text=result.text)] + service.artifact_content(run)
        return types.CallToolResult(content=content, is_error=result.is_error)

    def invalid(exc: Exception) -> MCPError:
        return MCPError(-32602, str(exc))

    async def list_resources(ctx, params):
        try:
            items = await anyio.to_thread.run_sync(service.files.resource_list)
        except SkillError as exc:
            raise invalid(exc) from None
        return types.ListResourcesResult(resources=[types.Resource(**_resource_fields(i)) for i in items])

    async def read_resource(ctx, params):
        try:
            item = await anyio.to_thread.run_sync(service.files.read_contents, str(params.uri))
        except SkillError as exc:
            raise invalid(exc) from None
        if "text" in item:
            contents = types.TextResourceContents(uri=item["uri"], mime_type=item["mimeType"], text=item["text"])
        else:
            contents = types.BlobResourceContents(uri=item["uri"], mime_type=item["mimeType"], blob=item["blob"])
        return types.ReadResourceResult(contents=[contents])

    class SkillsListParams(types.PaginatedRequestParams):
        pass

    class SkillsGetParams(types.RequestParams):
        uri: str

    async def skills_list(ctx, params):
        try:
            return await anyio.to_thread.run_sync(service.files.list_entries, params.cursor)
        except SkillError as exc:
            raise invalid(exc) from None

    async def skills_get(ctx, params):
        try:
            return await anyio.to_thread.run_sync(service.files.get_entry, params.uri)
        except SkillError as exc:
            raise invalid(exc) from None

    text = service.view.system_prompt("markdown") if instructions else ""
    server = Server(SERVER_NAME, version=__version__, instructions=text or None,
                    on_list_tools=list_tools, on_call_tool=call_tool,
                    on_list_resources=list_resources, on_read_resource=read_resource)
    server.add_request_handler("skills/list", SkillsListParams, skills_list)
    server.add_request_handler("skills/get", SkillsGetParams, skills_get)
    server.extensions[EXTENSION_ID] = {}  # no directoryRead: resources/directory/read is not served
    # Protocol revisions before 2026-07-28 have no `extensions` capability: there the declaration is
    # repeated under `experimental`, where a client of that era can see it.
    plain_options = server.create_initialization_options

    def initialization_options(notification_options=None, experimental_capabilities=None, extensions=None):
        experimental = {EXTENSION_ID: {}, **(experimental_capabilities or {})}
        return plain_options(notification_options, experimental, extensions)

    server.create_initialization_options = initialization_options
    server.ipyskills = service
    return server


def _resource_fields(item: dict) -> dict:
    fields = {"uri": item["uri"], "name": item["name"]}
    if item.get("description"):
        fields["description"] = item["description"]
    if item.get("mimeType"):
        fields["mime_type"] = item["mimeType"]
    return fields
