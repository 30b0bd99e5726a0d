"""The MCP Skills extension (SEP-2640, `io.modelcontextprotocol/skills`) over an agent view's skills.

Each visible skill is served at `skill://<name>/`: its SKILL.md and every file of its manifest are resources
(`resources/list`, `resources/read`), and `skills/list` / `skills/get` return one entry a skill: the SKILL.md
URI, the frontmatter as parsed (the verbatim YAML rendered as JSON), and every file with its size and
`sha256:<hex>` digest of the raw bytes. The skill path is the skill's name alone (no prefix), so the name is
the URI's authority. Nothing here runs anything: reading a skill file is transport, as the SEP says.

Confinement is the registry's own: files are listed by the same manifest `read_skill` shows and read with
`registry.read_bytes`, which refuses a path leaving the skill folder (links included). A skill whose manifest
was cut (more files than the manifest cap) or whose files cannot all be read is published with
`resources: "dynamic"`, since a partial list would break the SEP's completeness rule.
"""

from __future__ import annotations

import base64
import hashlib
import json
from urllib.parse import quote, unquote

from ...errors import SkillError

SCHEME = "skill"
EXTENSION_ID = "io.modelcontextprotocol/skills"
MAX_FILES = 512  # the SEP's per-skill limits: hosts must accept up to these
MAX_TOTAL_BYTES = 16 * 1024 * 1024
TTL_MS = 5000  # skills authored in a notebook change; clients should not cache a listing for long
PAGE_SIZE = 100  # skills per skills/list page
_TEXT_MIMES = ("application/json", "application/x-yaml", "application/yaml", "application/xml",
               "application/javascript", "application/x-sh", "application/toml")


def skill_uri(name: str, path: str = "SKILL.md") -> str:
    return f"{SCHEME}://{name}/{quote(path, safe='/')}"


def parse_uri(uri: str) -> tuple[str, str]:
    """(skill name, file path) of a `skill://name/path` URI; SkillError when it is not one."""
    prefix = f"{SCHEME}://"
    if not isinstance(uri, str) or not uri.startswith(prefix):
        raise SkillError(f"{uri!r} is not a skill:// URI; skill files are skill://<name>/<path>")
    name, sep, path = uri[len(prefix):].partition("/")
    if not name or not sep or not path:
        raise SkillError(f"{uri!r} names no file; a skill's instructions are at skill://<name>/SKILL.md")
    return name, unquote(path)


def _json_safe(value):
    """Frontmatter as JSON values (YAML dates and the like become their text)."""
    return json.loads(json.dumps(value, default=str, ensure_ascii=False))


class SkillFiles:
    """The skill files a view lets a client see: entries, resource listings and reads."""

    def __init__(self, view):
        self.view = view

    @property
    def registry(self):
        return self.view.registry

    def names(self) -> list[str]:
        return self.view.names()

    def _meta(self, name: str):
        if name not in self.names():  # a hidden skill reads exactly like a missing one
            raise SkillError(f"no skill named {name!r} is served here")
        return self.registry.get(name)

    def files(self, name: str) -> tuple[list[str], bool]:
        """(paths relative to the skill, complete?): SKILL.md first, then the manifest `read_skill` shows."""
        meta = self._meta(name)
        content = self.registry.load(name)
        paths = [meta.skill_md.name] + [p for p in content.resources if p != meta.skill_md.name]
        return paths, not content.resources_truncated

    def read(self, name: str, path: str) -> tuple[bytes, str]:
        """(raw bytes, mime type) of one file, confined to the skill folder."""
        self._meta(name)
        if path in ("SKILL.md", "skill.md"):
            meta = self.registry.get(name)
            path = meta.skill_md.name
        data, mime = self.registry.read_bytes(f"{name}/{path}", cap=MAX_TOTAL_BYTES)
        if path.lower() == "skill.md":
            mime = "text/markdown"
        return data, mime or "application/octet-stream"

    def entry(self, name: str) -> dict:
        """The SEP's Skill entry for `name`."""
        meta = self._meta(name)
        frontmatter = _json_safe(dict(meta.frontmatter or {}))
        frontmatter.setdefault("name", meta.name)
        frontmatter.setdefault("description", meta.description)
        try:
            paths, complete = self.files(name)
        except SkillError:  # its files cannot be listed now: published without a manifest, never dropped
            paths, complete = [], False
        resources: list[dict] | str = []
        total = 0
        if complete and len(paths) <= MAX_FILES:
            for path in paths:
                try:
                    data, _mime = self.read(name, path)
                except SkillError:
                    resources = "dynamic"  # a file we cannot serve: no complete, verifiable list
                    break
                total += len(data)
                resources.append({"uri": skill_uri(name, path),
                                  "digest": "sha256:" + hashlib.sha256(data).hexdigest(), "size": len(data)})
        else:
            resources = "dynamic"
        if isinstance(resources, list) and total > MAX_TOTAL_BYTES:
            resources = "dynamic"
        return {"uri": skill_uri(name), "frontmatter": frontmatter, "resources": resources}

    def list_entries(self, cursor: str | None) -> dict:
        names = self.names()
        start = 0
        if cursor:
            try:
                start = int(cursor)
            except ValueError:
                raise SkillError(f"invalid cursor {cursor!r}") from None
        page = names[start:start + PAGE_SIZE]
        result = {"resultType": "complete", "skills": [self.entry(n) for n in page],
                  "ttlMs": TTL_MS, "cacheScope": "private"}
        if start + PAGE_SIZE < len(names):
            result["nextCursor"] = str(start + PAGE_SIZE)
        return result

    def get_entry(self, uri: str) -> dict:
        name, path = parse_uri(uri)
        if path not in ("SKILL.md", "skill.md"):
            raise SkillError(f"{uri!r} is not a skill's SKILL.md; skills/get takes skill://<name>/SKILL.md")
        return {"resultType": "complete", "skill": self.entry(name), "ttlMs": TTL_MS, "cacheScope": "private"}

    def resource_list(self) -> list[dict]:
        """Every served file as a resource description (name, uri, mimeType, size)."""
        out = []
        for name in self.names():
            meta = self.registry.get(name)
            try:
                paths, _complete = self.files(name)
            except SkillError:  # one skill whose files cannot be listed does not hide the others
                paths = [meta.skill_md.name]
            for path in paths:
                item = {"uri": skill_uri(name, path), "name": f"{name}/{path}"}
                if path == meta.skill_md.name:
                    item.update(name=meta.name, description=meta.description, mimeType="text/markdown")
                out.append(item)
        return out

    def read_contents(self, uri: str) -> dict:
        """A resources/read content item: text when the file is UTF-8 text, else a base64 blob."""
        name, path = parse_uri(uri)
        data, mime = self.read(name, path)
        textual = mime.startswith("text/") or mime in _TEXT_MIMES
        if textual:
            try:
                return {"uri": uri, "mimeType": mime, "text": data.decode("utf-8")}
            except UnicodeDecodeError:
                pass
        return {"uri": uri, "mimeType": mime, "blob": base64.b64encode(data).decode("ascii")}
