"""What each skill costs a model's context, level by level, against the specification's guidance.

Level 1 is the skill's entry in the `<available_skills>` catalog (every conversation pays it); level 2 is
the `<skill_content>` text `read_skill` returns (instructions and file list); level 3 lists the largest
bundled files (each is paid only when read). The Agent Skills specification suggests about 100 tokens of
metadata and under 5,000 tokens of instructions.

Tokens come from the provider's counter when the client offers one (Anthropic's
`client.messages.count_tokens`), otherwise from an estimate of one token per four characters, and the
report says which.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from ...errors import SkillError

METADATA_TOKENS = 100  # the specification: "~100 tokens" of name and description, loaded for every skill
INSTRUCTION_TOKENS = 5000  # the specification: "< 5000 tokens recommended" for the SKILL.md body
LARGEST_FILES = 3
ESTIMATE = "estimate: characters / 4 (no provider counter)"
_ENTRY = re.compile(r"  <skill>\n.*?\n  </skill>", re.DOTALL)


def estimate_tokens(text: str) -> int:
    return (len(text) + 3) // 4


@dataclass
class FileCost:
    path: str
    bytes: int
    chars: int | None  # None: not UTF-8 text (a model cannot read it through read_skill)
    tokens: int | None


@dataclass
class SkillBudget:
    name: str
    level1_chars: int
    level1_tokens: int
    level2_chars: int
    level2_tokens: int
    files: list[FileCost] = field(default_factory=list)  # the largest level-3 files, largest first
    file_count: int = 0
    error: str = ""  # why level 2 could not be measured

    @property
    def warnings(self) -> list[str]:
        out = []
        if self.level1_tokens > METADATA_TOKENS * 1.5:  # "about 100": flag what is clearly over
            out.append(f"level 1 is {self.level1_tokens} tokens (guidance: about {METADATA_TOKENS})")
        if self.level2_tokens >= INSTRUCTION_TOKENS:
            out.append(f"level 2 is {self.level2_tokens} tokens (guidance: under {INSTRUCTION_TOKENS}); "
                       "move detail into references/ files")
        return out


@dataclass
class BudgetReport:
    skills: list[SkillBudget]
    method: str  # how tokens were counted

    @property
    def level1_total(self) -> int:
        """Tokens every conversation pays for the catalog of these skills."""
        return sum(s.level1_tokens for s in self.skills)

    def table(self) -> list[dict]:
        return [{"skill": s.name, "level1_chars": s.level1_chars, "level1_tokens": s.level1_tokens,
                 "level2_chars": s.level2_chars, "level2_tokens": s.level2_tokens,
                 "largest_file": s.files[0].path if s.files else "", "warnings": "; ".join(s.warnings)}
                for s in self.skills]

    def __str__(self) -> str:
        lines = [f"tokens: {self.method}",
                 f"guidance: level 1 about {METADATA_TOKENS} tokens, level 2 under {INSTRUCTION_TOKENS}",
                 f"{'skill':<28} {'L1 chars':>8} {'L1 tok':>6} {'L2 chars':>8} {'L2 tok':>6}  largest L3 files"]
        for s in self.skills:
            files = ", ".join(f"{f.path} ({_size(f)})" for f in s.files) or "-"
            lines.append(f"{s.name:<28} {s.level1_chars:>8,} {s.level1_tokens:>6,} {s.level2_chars:>8,} "
                         f"{s.level2_tokens:>6,}  {files}")
            lines += [f"  ! {w}" for w in s.warnings]
            if s.error:
                lines.append(f"  ! {s.error}")
        lines.append(f"catalog total (level 1, every conversation): {self.level1_total:,} tokens")
        return "\n".join(lines)


def _size(f: FileCost) -> str:
    return f"{f.tokens:,} tok" if f.tokens is not None else f"{f.bytes:,} bytes, binary"


def provider_counter(client, model: str | None) -> tuple[Callable[[str], int], str] | None:
    """(count(text), method) from the client's own token counter, or None when it has none.

    Anthropic-style clients have `messages.count_tokens(model=, messages=)`; the count includes the few
    tokens that frame one user message.
    """
    if client is None or not model:
        return None
    messages = getattr(client, "messages", None)
    count = getattr(messages, "count_tokens", None)
    if not callable(count):
        return None

    def counter(text: str) -> int:
        from ..loop import client_error

        try:
            result = count(model=model, messages=[{"role": "user", "content": text or " "}])
        except Exception as exc:  # the SDK's errors, as one line
            raise client_error(exc, model, "anthropic") from exc
        value = result.get("input_tokens") if isinstance(result, dict) else getattr(result, "input_tokens", None)
        if not isinstance(value, int):
            raise SkillError("the client's count_tokens returned no input_tokens")
        return value

    return counter, f"provider counter: messages.count_tokens with {model} (includes message framing)"


def skill_budget(registry, name: str | None = None, *, client=None, model: str | None = None,
                 counter: Callable[[str], int] | None = None, largest: int = LARGEST_FILES) -> BudgetReport:
    """Characters and tokens of each skill (or of `name`) at levels 1 and 2, and its largest files.

    `counter(text) -> tokens` overrides the counting; else the client's counter when it has one (with
    `model`), else the chars/4 estimate.
    """
    from ...core.prompt import catalog
    from ...core.resources import list_resources

    method = "custom counter" if counter else ESTIMATE
    if counter is None:
        found = provider_counter(client, model)
        if found:
            counter, method = found
        else:
            counter = estimate_tokens
    metas = [registry.get(name)] if name else registry.list()
    out = []
    for meta in metas:
        block = catalog([meta])
        entry = _ENTRY.search(block)
        level1 = entry.group(0) if entry else block
        try:
            level2, error = str(registry.load(meta.name)), ""
        except SkillError as exc:
            level2, error = "", f"level 2 not measured: {exc}"
        files = []
        manifest = list_resources(meta.path, cap=registry.settings.manifest_cap)
        sized = []
        for rel in manifest.files:
            try:
                sized.append(((meta.path / rel).stat().st_size, rel))
            except OSError:
                continue
        for size, rel in sorted(sized, key=lambda x: (-x[0], x[1]))[:largest]:
            chars = tokens = None
            try:
                text = (meta.path / rel).read_text(encoding="utf-8")
                chars, tokens = len(text), counter(text) if size <= 2_000_000 else estimate_tokens(text)
            except (UnicodeDecodeError, OSError):
                pass
            files.append(FileCost(rel, size, chars, tokens))
        out.append(SkillBudget(meta.name, len(level1), counter(level1), len(level2),
                               counter(level2) if level2 else 0, files, len(manifest.files), error))
    return BudgetReport(out, method)
