"""The table scripts/test.sh prints at its end: one row per stage with its seconds and its tests passed, failed and
skipped, so that the growth of each stage shows in every CI log.

    stage-table.py add TABLE STAGE SECONDS [LOG]   one row; the counts from LOG's last pytest summary line
    stage-table.py print TABLE                     the table, and a total row
    stage-table.py skips LIST LOG...               fails on a skipped test that LIST (docs/testing.md) does not name

A stage whose log holds no pytest summary (the lint checks, ansible-test sanity) shows "-" for its counts. The
rows are kept as tab-separated lines in TABLE (a file under .cache/), written as each stage ends, so a failed run
prints the stages it finished.

``skips``: every test a pytest log reports as skipped (``path::name SKIPPED``, written with -v) must be named in
LIST as ``file.py::name`` between backticks (docs/testing.md lists each with its reason); a log whose summary counts
more skips than it names (run with -q) fails too. Nothing else may skip in CI.
"""

import re
import sys

# pytest's closing line, with -q ("5 passed, 1 skipped in 12.34s") or -v ("==== 5 passed ... in 12.34s ====").
SUMMARY = re.compile(r"^=*\s*((?:\d+ \w+(?:, )?)+) in [\d.]+s\b", re.M)
KINDS = ("passed", "failed", "skipped")


def counts(text):
    """{passed, failed, skipped} of the last pytest summary line in text (errors count as failed), or None."""
    found = SUMMARY.findall(text)
    if not found:
        return None
    result = dict.fromkeys(KINDS, 0)
    for number, kind in re.findall(r"(\d+) (\w+)", found[-1]):
        kind = {"error": "failed", "errors": "failed", "xfailed": "passed", "xpassed": "failed"}.get(kind, kind)
        if kind in result:
            result[kind] += int(number)
    return result


SKIPPED = re.compile(r"^(?:\S*/)?([^/\s]+\.py)::(\w+)(?:\[[^\]]*\])? SKIPPED", re.M)
LISTED = re.compile(r"`(?:\S*/)?([^/`\s]+\.py)::(\w+)`")


def unlisted_skips(listing, logs):
    """Problems, one line each: a skipped test of one of logs ({name: text}) that listing does not name, or a log whose
    summary counts skips it does not name."""
    listed = set(LISTED.findall(listing))
    problems = []
    for name, text in logs.items():
        skipped = SKIPPED.findall(text)
        for test in sorted(set(skipped) - listed):
            problems.append("%s: %s::%s skipped, and docs/testing.md does not list it with a reason" % (name, *test))
        found = counts(text)
        if found and found["skipped"] > len(skipped):
            problems.append(
                "%s: %d skipped, %d of them named: run it with -v so that each skip can be checked"
                % (name, found["skipped"], len(skipped))
            )
    return problems


def row(stage, seconds, text=None):
    found = counts(text) if text is not None else None
    cells = [str(found[kind]) for kind in KINDS] if found else ["-"] * len(KINDS)
    return "\t".join([stage, str(int(seconds)), *cells])


def render(lines):
    """The table of the rows (tab-separated lines), with a total row."""
    rows = [line.split("\t") for line in lines if line.strip()]
    # What ran beside the others ("... (beside)") took no wall time of its own: its seconds are not added up.
    total = ["total", str(sum(int(r[1]) for r in rows if not r[0].endswith("(beside)")))]
    for column in range(2, 2 + len(KINDS)):
        numbers = [int(r[column]) for r in rows if r[column] != "-"]
        total.append(str(sum(numbers)) if numbers else "-")
    head = ["stage", "seconds", *KINDS]
    widths = [max(len(r[i]) for r in [head, *rows, total]) for i in range(len(head))]

    def fmt(cells):
        padded = (c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True)))
        return "  ".join(padded)

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([fmt(head), rule, *(fmt(r) for r in rows), rule, fmt(total)])


def main(argv):
    if len(argv) >= 4 and argv[0] == "add":
        table, stage, seconds = argv[1:4]
        text = None
        if len(argv) > 4:
            with open(argv[4], encoding="utf-8", errors="replace") as log:
                text = log.read()
        with open(table, "a", encoding="utf-8") as out:
            out.write(row(stage, float(seconds), text) + "\n")
        return 0
    if len(argv) == 2 and argv[0] == "print":
        with open(argv[1], encoding="utf-8") as table:
            print(render(table.read().splitlines()))
        return 0
    if len(argv) >= 2 and argv[0] == "skips":
        with open(argv[1], encoding="utf-8") as listing:
            listed = listing.read()
        logs = {}
        for path in argv[2:]:
            with open(path, encoding="utf-8", errors="replace") as log:
                logs[path] = log.read()
        problems = unlisted_skips(listed, logs)
        print("\n".join(problems) or "every skipped test is listed in %s with its reason" % argv[1])
        return 1 if problems else 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
