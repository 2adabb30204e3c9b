"""Write docs/variables.md from roles/*/meta/argument_specs.yml: per role, per entry point, every option's
name, type, default and description, Ansible's markup (C(), I(), O(), V(), M(), B(), U(), L(), E(), RV())
turned into Markdown.

    python3 scripts/docs-variables.py           # rewrite docs/variables.md
    python3 scripts/docs-variables.py --check   # exit 1, naming the file, when it is stale

argument_specs.yml is the one place a variable is documented (Ansible validates role input against it);
this page is generated from it and never edited by hand. `--check` runs in the unit tests
(tests/unit/test_docs_variables.py), so a change to an argument spec without the regenerated page fails CI.
"""

import argparse
import json
import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
OUTPUT = Path("docs/variables.md")
SPECS = "roles/*/meta/argument_specs.yml"
COMMAND = "python3 scripts/docs-variables.py"

# Ansible's markup: NAME(content). Code-like ones become code spans, I() and B() emphasis.
CODE_MARKUP = ("C", "O", "V", "M", "E", "RV", "P")
MARKUP_RE = re.compile(r"\b(RV|[CIOVMBUELP])\(")


def _closing(text, start):
    """Index of the parenthesis that closes the one before ``start``, counting nested pairs
    (C({ports, proto (tcp|udp)}) is one code span); -1 when there is none."""
    depth = 1
    for i in range(start, len(text)):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                return i
    return -1


def _code(text):
    """A Markdown code span of text, fenced with more backticks than it holds."""
    text = text.replace("\\)", ")").replace("\\(", "(")
    ticks = "`" * (max((len(m) for m in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return "%s%s%s%s%s" % (ticks, pad, text, pad, ticks)


def _plain(text):
    """Text outside markup, with the characters Markdown would read as emphasis, HTML or a code span escaped
    (an underscore inside a word, as in ray_user, is left alone: it starts no emphasis)."""
    text = re.sub(r"([\\`*<>\[\]])", r"\\\1", text)
    return re.sub(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])", r"\\_", text)


def markup(text):
    """Ansible markup in a description turned into Markdown."""
    out, pos = [], 0
    text = " ".join(str(text).split())
    while True:
        match = MARKUP_RE.search(text, pos)
        if not match:
            out.append(_plain(text[pos:]))
            return "".join(out)
        end = _closing(text, match.end())
        if end < 0:
            out.append(_plain(text[pos:]))
            return "".join(out)
        out.append(_plain(text[pos : match.start()]))
        kind, content = match.group(1), text[match.end() : end]
        if kind in CODE_MARKUP:
            # O(name=value) and RV(name=value) name an option or return value with a value.
            out.append(_code(content))
        elif kind == "I":
            out.append("*%s*" % _plain(content))
        elif kind == "B":
            out.append("**%s**" % _plain(content))
        elif kind == "U":
            out.append("<%s>" % content)
        elif kind == "L":
            label, _sep, url = content.rpartition(",")
            out.append("[%s](%s)" % (_plain(label.strip()), url.strip()))
        pos = end + 1


def _paragraphs(value):
    items = value if isinstance(value, list) else [value]
    return [markup(item) for item in items if item not in (None, "")]


def _cell(text):
    """Table cells are one line; a pipe would end the cell."""
    return text.replace("|", "\\|").replace("\n", " ")


def _type(spec):
    kind = spec.get("type", "str")
    return "%s of %s" % (kind, spec["elements"]) if spec.get("elements") else kind


def _default(name, spec):
    if spec.get("required"):
        return "**required**"
    if "default" not in spec:
        return "none"
    value = spec["default"]
    if isinstance(value, str):
        value = " ".join(value.split()) if "{{" in value or "{%" in value else value
        return _code(value) if value != "" else '`""`'
    return _code(json.dumps(value, ensure_ascii=False))


def _description(spec):
    parts = _paragraphs(spec.get("description", ""))
    if spec.get("choices"):
        parts.append("One of %s." % ", ".join(_code(str(c)) for c in spec["choices"]))
    if spec.get("no_log"):
        parts.append("Secret: never logged (`no_log`).")
    return "<br><br>".join(parts)


def _options_table(options):
    lines = ["| variable | type | default | description |", "| --- | --- | --- | --- |"]
    for name, spec in options.items():
        spec = spec or {}
        row = (_code(name), _type(spec), _default(name, spec), _description(spec))
        lines.append("| %s |" % " | ".join(_cell(c) for c in row))
    return lines


def _anchor(role):
    return "role-" + role.replace("_", "-")


def render(root):
    """The whole page, from every role's argument_specs.yml under root."""
    roles = []
    for path in sorted(root.glob(SPECS)):
        specs = (yaml.safe_load(path.read_text()) or {}).get("argument_specs") or {}
        roles.append((path.parent.parent.name, path.relative_to(root).as_posix(), specs))
    lines = [
        "# Variables",
        "",
        "<!-- Generated by %s from %s: do not edit. Change the argument specs, then run it. -->" % (COMMAND, SPECS),
        "",
        "Every public variable of every role, with its type and default, as each role's",
        "`meta/argument_specs.yml` declares it. Ansible checks a role's input against these specs before the role's",
        "first task runs, and the unit tests check them against `defaults/main.yml`. This page is generated from",
        "them (`%s`; CI fails when it is stale)." % COMMAND,
        "",
        "Most variables have a working default. The ones a production inventory sets are in the",
        "[README's quick start](../README.md#production-quick-start); the topic pages say which variables matter",
        "for what.",
        "",
        "Roles: %s." % ", ".join("[`%s`](#%s)" % (role, _anchor(role)) for role, _entry, _options in roles),
    ]
    for role, source, specs in roles:
        lines += ["", '<a id="%s"></a>' % _anchor(role), "", "## Role `%s`" % role, ""]
        lines += ["Source: [`%s`](../%s)." % (source, source)]
        main = (specs.get("main") or {}).get("options") or {}
        for entry, spec in specs.items():
            spec = spec or {}
            options = spec.get("options") or {}
            lines += ["", "### Entry point `%s`" % entry, ""]
            if spec.get("short_description"):
                lines += [markup(spec["short_description"]), ""]
            for paragraph in _paragraphs(spec.get("description", "")):
                lines += [paragraph, ""]
            if entry != "main" and options and options == main:
                lines.append("Takes the same variables as `main`.")
                continue
            if not options:
                lines.append("No variables.")
                continue
            lines += _options_table(options)
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the page differs from the argument specs")
    parser.add_argument("--root", type=Path, default=ROOT, help="the collection's root (default: this checkout)")
    args = parser.parse_args(argv)
    target = args.root / OUTPUT
    text = render(args.root)
    if args.check:
        if not target.exists() or target.read_text() != text:
            print(
                "%s is stale: it does not match %s. Run `%s` and commit the result." % (OUTPUT, SPECS, COMMAND),
                file=sys.stderr,
            )
            return 1
        print("%s is up to date" % OUTPUT)
        return 0
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    print("wrote %s" % OUTPUT)
    return 0


if __name__ == "__main__":
    sys.exit(main())
