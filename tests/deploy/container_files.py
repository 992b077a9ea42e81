"""Readers for the Dockerfile, docker-compose.yml and .env files, for the tests that check their rules
(no Docker engine runs here). The Dockerfile reader understands what our file uses: comments,
line continuations, stages (`FROM image AS name`), and JSON or shell forms of arguments."""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml  # PyYAML comes with chromadb (requirements.txt)

# Names that carry secrets: they must never get a value in an image or in the compose file.
SECRET_NAME = re.compile(r"SECRET|PASSW|TOKEN|FERNET|CREDENTIAL|(^|_)KEYS?($|_)|DATABASE_URL", re.IGNORECASE)
# A compose value that only refers to the environment (.env), with no default: ${NAME} or ${NAME:?message}.
ENV_REFERENCE = re.compile(r"^\$\{[A-Z_][A-Z0-9_]*(:?\?[^}]*)?\}$")


@dataclass
class Instruction:
    keyword: str
    args: str
    line: int

    def json_args(self) -> list[str] | None:
        """The arguments in JSON (exec) form, or None for the shell form."""
        text = self.args.strip()
        if not text.startswith("["):
            return None
        try:
            value = json.loads(text)
        except ValueError:
            return None
        return value if isinstance(value, list) and all(isinstance(v, str) for v in value) else None


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[Instruction] = field(default_factory=list)

    def all(self, keyword: str) -> list[Instruction]:
        return [i for i in self.instructions if i.keyword == keyword]

    def last(self, keyword: str) -> Instruction | None:
        found = self.all(keyword)
        return found[-1] if found else None

    def env(self) -> dict[str, str]:
        """Every ENV name and value set in this stage (later ones win)."""
        values: dict[str, str] = {}
        for instruction in self.all("ENV"):
            values.update(parse_assignments(instruction.args))
        return values

    def args(self) -> dict[str, str | None]:
        return declared_args(self.all("ARG"))


@dataclass
class Dockerfile:
    preamble: list[Instruction]
    stages: list[Stage]

    @property
    def final(self) -> Stage:
        return self.stages[-1]

    def stage_names(self) -> set[str]:
        return {stage.name for stage in self.stages if stage.name}

    def instructions(self, keyword: str) -> list[Instruction]:
        return [i for i in self.preamble if i.keyword == keyword] + [
            i for stage in self.stages for i in stage.instructions if i.keyword == keyword
        ]

    def healthcheck_python(self) -> str:
        """The Python source run by the final stage's HEALTHCHECK (`python -c SOURCE`)."""
        healthcheck = self.final.last("HEALTHCHECK")
        if healthcheck is None:
            raise AssertionError("the final stage has no HEALTHCHECK")
        command = healthcheck_command(healthcheck)
        if command[:2] != ["python", "-c"] or len(command) != 3:
            raise AssertionError(f"the HEALTHCHECK is not `python -c ...`: {command}")
        return command[2]


def parse_assignments(text: str) -> dict[str, str]:
    """`A=1 B="two words"` (or the legacy `A value`) as a dict."""
    words = shlex.split(text, posix=True)
    if words and "=" not in words[0]:
        return {words[0]: " ".join(words[1:])}
    return dict(word.split("=", 1) for word in words)


def declared_args(instructions: list[Instruction]) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for instruction in instructions:
        for word in shlex.split(instruction.args, posix=True):
            name, has_value, value = word.partition("=")
            out[name] = value if has_value else None
    return out


def healthcheck_command(instruction: Instruction) -> list[str]:
    """The command of `HEALTHCHECK [--options] CMD ...` as a list."""
    match = re.search(r"(?:^|\s)CMD\s+(.*)$", instruction.args, re.DOTALL)
    if not match:
        raise AssertionError(f"HEALTHCHECK without CMD: {instruction.args}")
    rest = Instruction("CMD", match[1], instruction.line)
    return rest.json_args() or ["/bin/sh", "-c", match[1]]


def logical_lines(text: str) -> list[tuple[int, str]]:
    """(first line number, instruction text) with continuations joined and comments dropped."""
    out: list[tuple[int, str]] = []
    pending: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if stripped.startswith("#") or (not stripped and not pending):
            continue  # comment lines are dropped, also inside a continued instruction
        if not pending:
            start = number
        if stripped.endswith("\\"):
            pending.append(stripped[:-1].strip())
            continue
        pending.append(stripped)
        out.append((start, " ".join(part for part in pending if part)))
        pending = []
    if pending:
        out.append((start, " ".join(pending)))
    return out


def parse_dockerfile(path: Path) -> Dockerfile:
    preamble: list[Instruction] = []
    stages: list[Stage] = []
    for number, line in logical_lines(path.read_text()):
        keyword, _, args = line.partition(" ")
        instruction = Instruction(keyword.upper(), args.strip(), number)
        if instruction.keyword == "FROM":
            words = [w for w in instruction.args.split() if not w.startswith("--")]
            name = words[2] if len(words) >= 3 and words[1].upper() == "AS" else None
            stages.append(Stage(words[0], name))
        elif stages:
            stages[-1].instructions.append(instruction)
        else:
            preamble.append(instruction)
    return Dockerfile(preamble, stages)


def image_tag(image: str) -> str | None:
    """The tag of an image reference (also of `name:tag@sha256:...`), else its digest, None when it has neither."""
    name, _, digest = image.partition("@")
    last = name.rsplit("/", 1)[-1]
    if ":" in last:
        return last.split(":", 1)[1]
    return digest or None


def parse_env_file(path: Path) -> tuple[dict[str, str], set[str]]:
    """(NAME -> value of set lines, names that appear only commented out as `# NAME=value`)."""
    values: dict[str, str] = {}
    commented: set[str] = set()
    for raw in path.read_text().splitlines():
        line = raw.strip()
        match = re.match(r"^(#\s*)?([A-Z][A-Z0-9_]*)=(.*)$", line)
        if not match:
            continue
        if match[1]:
            commented.add(match[2])
        else:
            values[match[2]] = match[3]
    return values, commented - set(values)


def load_compose(path: Path) -> dict[str, Any]:
    return yaml.safe_load(path.read_text())


def compose_environment(service: dict[str, Any]) -> dict[str, str]:
    environment = service.get("environment") or {}
    if isinstance(environment, list):
        return dict(item.split("=", 1) if "=" in item else (item, "") for item in environment)
    return {name: "" if value is None else str(value) for name, value in environment.items()}


def env_references(text: str) -> set[str]:
    """Names of the ${NAME...} references in a text."""
    return set(re.findall(r"\$\{([A-Z_][A-Z0-9_]*)", text))


def bash_tcp_probe(healthcheck: dict[str, Any]) -> tuple[str, int, str]:
    """(script, port, path) of a compose health check `CMD bash -c SCRIPT` that opens
    /dev/tcp/HOST/PORT and sends `GET PATH`; an AssertionError says what is not of that shape."""
    test = healthcheck["test"]
    if not isinstance(test, list) or test[:3] != ["CMD", "bash", "-c"] or len(test) != 4:
        raise AssertionError(f"the health check is not `CMD bash -c SCRIPT`: {test}")
    script = test[3]
    target = re.search(r"/dev/tcp/(127\.0\.0\.1|localhost)/(\d+)\b", script)
    request = re.search(r"GET (/\S*) HTTP/1\.[01]", script)
    if not target or not request:
        raise AssertionError(f"the health check opens no loopback /dev/tcp port or sends no GET: {script}")
    return script, int(target[2]), request[1]
