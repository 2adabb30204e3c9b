# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""Read a host's NVIDIA GPUs and their interconnect from ``nvidia-smi`` output.

Plain Python, standard library only: unit-tested without Ansible or a GPU, and
shipped to managed hosts by Ansible's module_utils mechanism.

Two commands are parsed:

* ``nvidia-smi --query-gpu=<QUERY_FIELDS> --format=csv,noheader,nounits``: one
  line per GPU, values separated by ``", "``.
* ``nvidia-smi topo -m``: a tab-separated matrix. The header row is a tab then
  ``GPU0 .. GPUn-1``, possibly ``NIC0 .. NICm-1``, then ``CPU Affinity``,
  ``NUMA Affinity`` and (newer drivers) ``GPU NUMA ID``. One row per GPU, then
  one per NIC, then a blank line, a ``Legend:`` block and possibly a
  ``NIC Legend:`` block (``NIC0: mlx5_0``). On a tty the header is wrapped in
  ANSI escape codes, which are stripped.

Single-GPU hosts: ``nvlink_full_mesh`` is False when there are fewer than two
GPUs (there is no NVLink to speak of), so ``require_nvlink`` fails there.
"""

from __future__ import annotations

import re

QUERY_FIELDS = (
    "index",
    "name",
    "uuid",
    "memory.total",
    "pci.bus_id",
    "driver_version",
    "mig.mode.current",
)

QUERY_FORMAT = "csv,noheader,nounits"

ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
GPU_LABEL = re.compile(r"^GPU(\d+)$")
NIC_LABEL = re.compile(r"^NIC(\d+)$")
LINK_LABEL = re.compile(r"^(X|[A-Z]+[0-9]*)$")
NVLINK_LABEL = re.compile(r"^NV\d+$")
NIC_LEGEND_LINE = re.compile(r"^\s*(NIC\d+)\s*:\s*(\S+)\s*$")
VERSION = re.compile(r"^\d+(\.\d+)*$")
NOT_AVAILABLE = ("", "N/A", "[N/A]", "[Not Supported]", "Not Supported")

MISSING_HINT = "the NVIDIA driver is missing or not installed on this host"
BROKEN_HINT = "the NVIDIA driver is missing or broken on this host"


class GpuTopologyError(Exception):
    """Base class: reading the GPUs failed; ``str()`` is a message for the operator."""


class NvidiaSmiError(GpuTopologyError):
    """nvidia-smi is missing, cannot be run, or exited non-zero."""


class ParseError(GpuTopologyError):
    """nvidia-smi output does not have the expected shape."""


def query_command(nvidia_smi="nvidia-smi"):
    """The argv of the per-GPU query."""
    return [nvidia_smi, "--query-gpu=" + ",".join(QUERY_FIELDS), "--format=" + QUERY_FORMAT]


def topology_command(nvidia_smi="nvidia-smi"):
    """The argv of the topology matrix."""
    return [nvidia_smi, "topo", "-m"]


def strip_ansi(text):
    """Remove ANSI escape sequences (nvidia-smi underlines the header on a tty)."""
    return ANSI_ESCAPE.sub("", text)


def _quote(line):
    line = line if len(line) <= 300 else line[:300] + "..."
    return repr(line)


def parse_query(text):
    """Parse the ``--query-gpu`` CSV. Returns ``(driver_version, gpus)``.

    ``gpus`` is a list of dicts sorted by index: ``index`` (int), ``name``,
    ``uuid``, ``memory_total_mib`` (int), ``pci_bus_id``, ``mig_enabled``
    (bool; ``[N/A]`` means the GPU has no MIG and counts as False). Empty output
    means no GPU and gives ``("", [])``. Raises ParseError naming the bad line.
    """
    gpus = []
    drivers = []
    seen = set()
    for number, raw in enumerate(strip_ansi(text).splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        fields = [f.strip() for f in line.split(",")]
        if len(fields) != len(QUERY_FIELDS):
            raise ParseError(
                "cannot parse line %d of the nvidia-smi GPU query output: %s (expected %d comma-separated "
                "fields: %s; got %d)" % (number, _quote(raw), len(QUERY_FIELDS), ", ".join(QUERY_FIELDS), len(fields))
            )
        index, name, uuid, memory, bus_id, driver, mig = fields
        if not index.isdigit():
            raise ParseError(
                "cannot parse line %d of the nvidia-smi GPU query output: %s (index %r is not a number)"
                % (number, _quote(raw), index)
            )
        if not memory.isdigit():
            raise ParseError(
                "cannot parse line %d of the nvidia-smi GPU query output: %s (memory.total %r is not a number "
                "of MiB)" % (number, _quote(raw), memory)
            )
        if mig == "Enabled":
            mig_enabled = True
        elif mig == "Disabled" or mig in NOT_AVAILABLE:
            mig_enabled = False
        else:
            raise ParseError(
                "cannot parse line %d of the nvidia-smi GPU query output: %s (mig.mode.current %r is not "
                "Enabled, Disabled or [N/A])" % (number, _quote(raw), mig)
            )
        if int(index) in seen:
            raise ParseError(
                "cannot parse line %d of the nvidia-smi GPU query output: %s (GPU index %s listed twice)"
                % (number, _quote(raw), index)
            )
        seen.add(int(index))
        drivers.append(driver)
        gpus.append(
            {
                "index": int(index),
                "name": name,
                "uuid": uuid,
                "memory_total_mib": int(memory),
                "pci_bus_id": bus_id,
                "mig_enabled": mig_enabled,
            }
        )
    gpus.sort(key=lambda g: g["index"])
    return (drivers[0] if drivers else ""), gpus


def _split_cells(line):
    # Real output separates cells by tabs; text pasted from a terminal has
    # runs of spaces instead (columns padded to tab stops).
    if "\t" in line:
        return [c.strip() for c in line.split("\t")]
    return [c.strip() for c in re.split(r" {2,}", line)]


def _is_header(cells):
    cells = [c for c in cells if c]
    return bool(cells) and cells[0] == "GPU0" and (len(cells) == 1 or cells[1] != "X")


def parse_topology(text):
    """Parse ``nvidia-smi topo -m``.

    Returns a dict:

    * ``matrix``: list of lists of link labels between GPUs (``X`` on the
      diagonal, ``NV18``, ``PIX``, ``SYS``...); NIC rows and columns excluded.
    * ``cpu_affinity`` / ``numa_affinity`` / ``gpu_numa_id``: one string per
      GPU as printed, or None where the column is absent or says ``N/A``.
    * ``nics``: NIC column names (``NIC0``...) in order.
    * ``nic_legend``: dict ``{"NIC0": "mlx5_0", ...}`` from the ``NIC Legend:``.

    Raises ParseError naming the line that does not fit.
    """
    lines = strip_ansi(text).splitlines()
    header_at = None
    for number, line in enumerate(lines):
        if _is_header(_split_cells(line.strip())):
            header_at = number
            break
    if header_at is None:
        first = next((ln for ln in lines if ln.strip()), "")
        raise ParseError(
            "cannot parse the nvidia-smi topo -m output: no header line starting with GPU0 found "
            "(first line: %s)" % _quote(first)
        )

    header_line = lines[header_at]
    columns = [c for c in _split_cells(header_line.strip()) if c]
    gpu_cols, nic_cols, extra_cols = [], [], []
    for name in columns:
        if GPU_LABEL.match(name) or NIC_LABEL.match(name):
            if extra_cols:
                raise ParseError(
                    "cannot parse line %d of the nvidia-smi topo -m output (header): %s (%s after the affinity "
                    "columns)" % (header_at + 1, _quote(header_line), name)
                )
            if GPU_LABEL.match(name):
                if nic_cols or name != "GPU%d" % len(gpu_cols):
                    raise ParseError(
                        "cannot parse line %d of the nvidia-smi topo -m output (header): %s (expected GPU%d, "
                        "found %s)" % (header_at + 1, _quote(header_line), len(gpu_cols), name)
                    )
                gpu_cols.append(name)
            else:
                nic_cols.append(name)
        else:
            extra_cols.append(name)
    width = len(gpu_cols) + len(nic_cols)

    matrix, gpu_extras = [], []
    nic_rows = 0
    end = len(lines)
    for number in range(header_at + 1, len(lines)):
        raw = lines[number]
        if not raw.strip() or raw.strip().startswith("Legend"):
            end = number
            break
        cells = _split_cells(raw.strip())
        label = cells[0]
        values = cells[1:]
        where = "line %d of the nvidia-smi topo -m output" % (number + 1)
        gpu = GPU_LABEL.match(label)
        if not gpu and not NIC_LABEL.match(label):
            raise ParseError("cannot parse %s: %s (not a GPU or NIC row)" % (where, _quote(raw)))
        if len(values) < width:
            raise ParseError(
                "cannot parse %s: %s (%d link cells, the header has %d GPU/NIC columns)"
                % (where, _quote(raw), len(values), width)
            )
        links = values[:width]
        for cell in links:
            if not LINK_LABEL.match(cell):
                raise ParseError("cannot parse %s: %s (%r is not a link label)" % (where, _quote(raw), cell))
        if not gpu:
            nic_rows += 1
            continue
        if nic_rows or int(gpu.group(1)) != len(matrix):
            raise ParseError("cannot parse %s: %s (expected the row of GPU%d)" % (where, _quote(raw), len(matrix)))
        if len(matrix) >= len(gpu_cols):
            raise ParseError(
                "cannot parse %s: %s (the header has only %d GPU columns)" % (where, _quote(raw), len(gpu_cols))
            )
        row = links[: len(gpu_cols)]
        if row[len(matrix)] != "X":
            raise ParseError("cannot parse %s: %s (GPU%d is not X against itself)" % (where, _quote(raw), len(matrix)))
        matrix.append(row)
        # "0-47,96-143\t0\t\tN/A": empty cells between the affinity columns are padding.
        gpu_extras.append([c for c in values[width:] if c])
    if len(matrix) != len(gpu_cols):
        raise ParseError(
            "cannot parse the nvidia-smi topo -m output: the header has %d GPU columns but %d GPU rows follow "
            "(header: %s)" % (len(gpu_cols), len(matrix), _quote(header_line))
        )

    def column(name):
        if name not in extra_cols:
            return [None] * len(matrix)
        at = extra_cols.index(name)
        out = []
        for extras in gpu_extras:
            value = extras[at] if at < len(extras) else None
            out.append(None if value is None or value in NOT_AVAILABLE else value)
        return out

    nic_legend = {}
    for line in lines[end:]:
        found = NIC_LEGEND_LINE.match(line)
        if found:
            nic_legend[found.group(1)] = found.group(2)

    return {
        "matrix": matrix,
        "cpu_affinity": column("CPU Affinity"),
        "numa_affinity": column("NUMA Affinity"),
        "gpu_numa_id": column("GPU NUMA ID"),
        "nics": nic_cols,
        "nic_legend": nic_legend,
    }


def is_nvlink(label):
    """True for ``NV#`` labels (``NV18``, ``NV12``, ``NV4``...)."""
    return bool(NVLINK_LABEL.match(label or ""))


def non_nvlink_pairs(topology, gpus=None):
    """``[(i, j, label), ...]`` for every pair i < j (among ``gpus``, default all) not linked by NV#."""
    indices = range(len(topology)) if gpus is None else list(gpus)
    indices = list(indices)
    out = []
    for a, i in enumerate(indices):
        for j in indices[a + 1 :]:
            if not is_nvlink(topology[i][j]):
                out.append((i, j, topology[i][j]))
    return out


def nvlink_full_mesh(topology):
    """True when there are at least 2 GPUs and every distinct pair is linked by NV#.

    A host with 0 or 1 GPU gives False: it has no NVLink mesh.
    """
    return len(topology) >= 2 and not non_nvlink_pairs(topology)


def tp_groups(gpu_count, tp_size):
    """The consecutive groups ``[0..tp-1], [tp..2tp-1], ...`` that fit in ``gpu_count`` GPUs.

    Leftover GPUs (``gpu_count % tp_size``) form no group. Raises ValueError when tp_size < 1.
    """
    if int(tp_size) < 1:
        raise ValueError("tp_size must be at least 1, got %r" % (tp_size,))
    tp_size = int(tp_size)
    return [list(range(start, start + tp_size)) for start in range(0, gpu_count - tp_size + 1, tp_size)]


def tp_groups_nvlink_ok(topology, tp_size):
    """Whether each consecutive group of ``tp_size`` GPUs is fully connected by NV# links.

    False when not even one group fits (``tp_size`` larger than the GPU count).
    ``tp_size`` 1 is True on any host with a GPU (no pair to link). GPUs left
    over after the last full group are not checked.
    """
    groups = tp_groups(len(topology), tp_size)
    return bool(groups) and all(not non_nvlink_pairs(topology, g) for g in groups)


def compare_versions(a, b):
    """Compare dotted numeric versions component-wise: -1, 0 or 1 (``580.95.05`` > ``535.216.01``).

    Missing components count as 0 (``550`` == ``550.0.0``). Raises ValueError
    for anything that is not dotted digits.
    """
    parts = []
    for value in (a, b):
        value = str(value).strip()
        if not VERSION.match(value):
            raise ValueError("%r is not a dotted numeric version such as 550.127.05" % (value,))
        parts.append([int(p) for p in value.split(".")])
    x, y = parts
    size = max(len(x), len(y))
    x = x + [0] * (size - len(x))
    y = y + [0] * (size - len(y))
    return (x > y) - (x < y)


def _plural(count, word):
    return "%d %s%s" % (count, word, "" if count == 1 else "s")


def check_expectations(
    facts, expected_gpu_count=None, expected_gpu_name=None, min_driver_version=None, require_nvlink=False
):
    """Compare ``facts`` (as returned by :func:`collect`) with what is expected.

    Returns a list of problem strings, empty when everything holds. The name
    check is a case-insensitive substring match against every GPU's name.
    """
    problems = []
    count = facts["gpu_count"]
    if expected_gpu_count is not None and count != expected_gpu_count:
        problems.append("expected %s, found %d" % (_plural(expected_gpu_count, "GPU"), count))
    if expected_gpu_name:
        wrong = [g for g in facts["gpus"] if expected_gpu_name.lower() not in g["name"].lower()]
        if wrong:
            by_name = {}
            for g in wrong:
                by_name.setdefault(g["name"], []).append(str(g["index"]))
            found = ", ".join("%r (GPU %s)" % (name, ", ".join(idx)) for name, idx in by_name.items())
            problems.append("expected every GPU name to contain %r, found %s" % (expected_gpu_name, found))
        elif not facts["gpus"]:
            problems.append("expected GPUs named like %r, found no GPU" % (expected_gpu_name,))
    if min_driver_version:
        driver = facts["driver_version"]
        try:
            older = compare_versions(driver, min_driver_version) < 0
        except ValueError:
            problems.append(
                "expected driver version >= %s, found %r which is not a numeric version" % (min_driver_version, driver)
            )
        else:
            if older:
                problems.append("expected driver version >= %s, found %s" % (min_driver_version, driver))
    if require_nvlink and not facts["nvlink_full_mesh"]:
        if count < 2:
            problems.append("expected all GPUs linked by NVLink, found %s (no NVLink mesh)" % _plural(count, "GPU"))
        else:
            pairs = non_nvlink_pairs(facts["topology"])
            shown = ", ".join("GPU%d-GPU%d %s" % p for p in pairs[:8])
            more = " and %d more" % (len(pairs) - 8) if len(pairs) > 8 else ""
            problems.append(
                "expected all GPU pairs linked by NVLink (NV#), found %d pairs without: %s%s"
                % (len(pairs), shown, more)
            )
    return problems


def _run(run, argv):
    command = " ".join(argv)
    try:
        rc, out, err = run(argv)
    except OSError as exc:
        raise NvidiaSmiError("cannot run %s (%s): %s" % (argv[0], exc, MISSING_HINT))
    if rc != 0:
        detail = (err or "").strip() or (out or "").strip() or "no output"
        raise NvidiaSmiError("`%s` failed with rc %s: %s. nvidia-smi said: %s" % (command, rc, BROKEN_HINT, detail))
    return out


def collect(run, nvidia_smi="nvidia-smi"):
    """Run the two nvidia-smi commands through ``run(argv) -> (rc, stdout, stderr)`` and parse them.

    ``run`` may raise OSError when the binary does not exist. Returns the facts
    dict: ``gpu_count``, ``driver_version``, ``gpus``, ``topology``,
    ``nvlink_full_mesh``, ``numa_affinity``. Raises NvidiaSmiError or ParseError.
    """
    driver, gpus = parse_query(_run(run, query_command(nvidia_smi)))
    topo = parse_topology(_run(run, topology_command(nvidia_smi)))
    if len(topo["matrix"]) != len(gpus):
        raise ParseError(
            "nvidia-smi lists %s in the GPU query but %s in topo -m"
            % (_plural(len(gpus), "GPU"), _plural(len(topo["matrix"]), "GPU"))
        )
    return {
        "gpu_count": len(gpus),
        "driver_version": driver,
        "gpus": gpus,
        "topology": topo["matrix"],
        "nvlink_full_mesh": nvlink_full_mesh(topo["matrix"]),
        "numa_affinity": topo["numa_affinity"],
    }


def needs_fabric_manager(facts):
    """Whether a host looks like an NVSwitch board (HGX/DGX A100, H100, H200, B200).

    Eight or more GPUs with every pair linked by NVLink is only possible through
    NVSwitch, and NVSwitch systems need ``nvidia-fabricmanager`` running or CUDA
    fails to initialise. Smaller NVLink meshes (2 or 4 GPUs) link directly.
    """
    return facts["gpu_count"] >= 8 and facts["nvlink_full_mesh"]


def _variant(facts):
    names = sorted({g["name"] for g in facts["gpus"]})
    return (" + ".join(names) or "no GPU", facts["gpu_count"], facts["driver_version"] or "no driver")


def fleet_problems(reports, tensor_parallel_size=0, allow_cross_node_tp=False, require_nvlink=False):
    """Problems of a fleet, given ``{host: facts}`` with facts as returned by :func:`collect`.

    Checks that every host has the same GPU name(s), count and driver (the
    message lists the hosts of each variant), that each host holds a whole
    tensor-parallel group (``tensor_parallel_size`` 0 means "not decided yet":
    skipped; ``allow_cross_node_tp`` lifts the rule), and with ``require_nvlink``
    that every consecutive group of ``tensor_parallel_size`` GPUs is linked by
    NVLink. Returns a list of messages, empty when the fleet is fine.
    """
    problems = []
    variants = {}
    for host in sorted(reports):
        variants.setdefault(_variant(reports[host]), []).append(host)
    if len(variants) > 1:
        listed = "; ".join(
            "%s x %s, driver %s on %s" % (count, name, driver, ", ".join(hosts))
            for (name, count, driver), hosts in sorted(variants.items(), key=lambda kv: (-len(kv[1]), kv[0]))
        )
        problems.append(
            "the GPU fleet is not uniform (GPU name, count and driver must match on every Ray node): %s" % listed
        )
    tp = int(tensor_parallel_size or 0)
    if tp < 0:
        raise ValueError("tensor_parallel_size must be 0 (auto) or more, got %r" % (tensor_parallel_size,))
    for host in sorted(reports):
        facts = reports[host]
        count = facts["gpu_count"]
        if tp and tp > count and not allow_cross_node_tp:
            problems.append(
                "%s has %s but tensor parallel size %d needs %d on one node: lower the tensor parallel size "
                "to at most %d and raise the pipeline parallel size instead"
                % (host, _plural(count, "GPU"), tp, tp, count)
            )
            continue
        if require_nvlink and tp > 1 and tp <= count:
            bad = []
            for group in tp_groups(count, tp):
                pairs = non_nvlink_pairs(facts["topology"], group)
                if pairs:
                    bad.append(
                        "GPUs %s (%s)"
                        % (",".join(str(i) for i in group), ", ".join("GPU%d-GPU%d %s" % p for p in pairs[:4]))
                    )
            if bad:
                problems.append(
                    "%s: tensor parallel groups of %d would cross links that are not NVLink: %s; "
                    "repair the NVLink (nvidia-smi nvlink -s) or drain the host" % (host, tp, "; ".join(bad))
                )
    return problems
