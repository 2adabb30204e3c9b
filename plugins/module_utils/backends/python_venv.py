# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""Plain parts of the python_venv module: the venv's record of what it holds, the installer's command lines,
and what a venv holds (its Python, the versions of named distributions) read from its files, without running it.

A venv records what was installed into it in a marker file (MARKER) once the install completed; the install runs
only when the record differs from the request, so a second run is a no-op and check mode is exact. The record's
text is the one the python_venv role wrote before this module existed: venvs installed then are not reinstalled.
"""

import hashlib
import os
import re

MARKER = ".rayvllm-requirements"
INSTALLERS = ("uv", "pip")


def source_args(find_links="", index_url=""):
    """pip/uv arguments choosing where packages come from: a wheelhouse directory (no index), an index, or the
    installer's default index."""
    if find_links:
        return ["--no-index", "--find-links", find_links]
    if index_url:
        return ["--index-url", index_url]
    return []


def marker_text(interpreter, requirements, args, remove=()):
    """The record written after a complete install (the same bytes as the role's template wrote)."""
    text = (
        "# Written by rayvllm.fleet after a successful pip install; delete to force a reinstall.\n"
        "interpreter: %s\nrequirements: %s\npip_args: %s\n" % (interpreter, " ".join(requirements), " ".join(args))
    )
    if remove:
        text += "remove: %s\n" % " ".join(remove)
    return text


def record_digest(python):
    """A digest of the record (MARKER) of the venv whose interpreter is ``python`` (``<venv>/bin/python``): it
    changes whenever the venv is installed again with other requirements, at the same path. "" when there is no
    record (an interpreter outside a venv of this collection, or a venv not installed yet)."""
    marker = os.path.join(os.path.dirname(os.path.dirname(python)), MARKER)
    try:
        with open(marker, "rb") as handle:
            return hashlib.sha256(handle.read()).hexdigest()[:16]
    except OSError:
        return ""


def install_commands(installer, venv, requirements, args, remove=(), uv=None, compile_bytecode=True):
    """[argv, ...] installing requirements into an existing venv, then removing the packages in remove. uv does not
    compile: the module compiles after the removals, reusing the bytecode of sibling venvs (compile_command)."""
    python = os.path.join(venv, "bin", "python")
    if installer == "uv":
        if not uv:
            raise ValueError("the uv installer needs the uv binary's path")
        install = [uv, "pip", "install", "--python", python]
        commands = [install + list(args) + list(requirements)]
        if remove:
            commands.append([uv, "pip", "uninstall", "--python", python] + list(remove))
        return commands
    if installer == "pip":
        pip = [python, "-m", "pip"]
        commands = [
            pip + ["install"] + ([] if compile_bytecode else ["--no-compile"]) + list(args) + list(requirements)
        ]
        if remove:
            commands.append(pip + ["uninstall", "--yes"] + list(remove))
        return commands
    raise ValueError("installer must be one of %s, got %r" % (", ".join(INSTALLERS), installer))


def uv_tool_commands(interpreter, tool_venv, version, args):
    """[argv, ...] putting uv==version into its own small venv with pip, from the same wheelhouse or index as
    the venvs it builds (air-gapped fleets: the wheelhouse holds the uv wheel)."""
    return [
        [interpreter, "-m", "venv", tool_venv],
        [os.path.join(tool_venv, "bin", "python"), "-m", "pip", "install", "--quiet"]
        + list(args)
        + ["uv==%s" % version],
    ]


# Compiles what has no current bytecode (compile_file skips a module whose bytecode records its source's mtime and
# size), one process per core, each with its share of the files (compileall's own workers take one file per round
# trip: about a quarter more CPU than uv's compiler for a whole vLLM venv). A module that does not compile (test
# data in Python 2) is skipped, as uv and pip do.
_COMPILE = """
import compileall, os, sys
from concurrent.futures import ProcessPoolExecutor

def compile_share(paths):
    for path in paths:
        compileall.compile_file(path, quiet=2)

paths = []
for top in sys.argv[1:]:
    for directory, subdirectories, names in os.walk(top):
        subdirectories[:] = [name for name in subdirectories if name != "__pycache__"]
        paths.extend(os.path.join(directory, name) for name in names if name.endswith(".py"))
paths.sort()
workers = max(1, min(len(paths), os.cpu_count() or 1))
with ProcessPoolExecutor(workers) as pool:
    list(pool.map(compile_share, [paths[n::workers] for n in range(workers)]))
"""


def compile_command(venv):
    """argv compiling the bytecode of every module in the venv's site-packages with the venv's Python."""
    return [os.path.join(venv, "bin", "python"), "-c", _COMPILE] + site_packages(venv)


def bytecode_donors(venv):
    """The other venvs beside venv (same parent directory, links such as current/ left out): an upgrade's new
    venv shares most of its files with the one that serves."""
    parent, name = os.path.split(os.path.normpath(venv))
    try:
        entries = sorted(os.listdir(parent))
    except OSError:
        return []
    donors = []
    for entry in entries:
        path = os.path.join(parent, entry)
        if entry != name and not os.path.islink(path) and os.path.isfile(os.path.join(path, "pyvenv.cfg")):
            donors.append(path)
    return donors


_PYC = re.compile(r"^[a-z]+-\d+(\.opt-\d+)?\.pyc$")  # what follows "<module>." in __pycache__: cpython-311.pyc


def _cached(listings, directory):
    if directory not in listings:
        try:
            listings[directory] = os.listdir(directory)
        except OSError:
            listings[directory] = []
    return listings[directory]


def _donor_bytecode(donor_dirs, filename, source, listings):
    """(donor __pycache__, [its bytecode files for filename]) from the first donor directory whose filename is the
    same inode as source; None when no donor holds the very same file."""
    for donor_dir in donor_dirs:
        try:
            theirs = os.stat(os.path.join(donor_dir, filename))
        except OSError:
            continue
        if (theirs.st_ino, theirs.st_dev) == (source.st_ino, source.st_dev):
            prefix = filename[:-3] + "."
            donor_cache = os.path.join(donor_dir, "__pycache__")
            names = _cached(listings, donor_cache)
            return donor_cache, [n for n in names if n.startswith(prefix) and _PYC.match(n[len(prefix) :])]
    return None


def link_donor_bytecode(venv, donors):
    """Hard-links into venv the bytecode a donor venv compiled for the very same source file: the same inode, a
    file uv linked from its cache into both venvs (the bytecode records the source's mtime and size, which a
    shared inode keeps). Only the modules that changed are left to compile. Returns how many files it linked."""
    linked = 0
    listings = {}
    for site in site_packages(venv):
        relative_site = os.path.relpath(site, venv)
        donor_sites = [os.path.join(d, relative_site) for d in donors]
        donor_sites = [d for d in donor_sites if os.path.isdir(d)]
        if not donor_sites:
            continue
        for root, dirs, files in os.walk(site):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            relative = os.path.relpath(root, site)
            donor_dirs = [os.path.normpath(os.path.join(d, relative)) for d in donor_sites]
            for filename in files:
                if not filename.endswith(".py"):
                    continue
                try:
                    found = _donor_bytecode(donor_dirs, filename, os.stat(os.path.join(root, filename)), listings)
                except OSError:
                    continue
                if not found or not found[1]:
                    continue
                donor_cache, names = found
                cache = os.path.join(root, "__pycache__")
                if not os.path.isdir(cache):
                    os.mkdir(cache, 0o755)
                for pyc in names:
                    try:
                        os.link(os.path.join(donor_cache, pyc), os.path.join(cache, pyc))
                        linked += 1
                    except OSError:  # already there, or another filesystem: compiled below instead
                        pass
    return linked


_NAME = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)")


def normalize(name):
    """A distribution name as PEP 503 compares them (Ray, ray, ray_cpp -> ray-cpp)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(requirement):
    """The distribution a requirement string names ('ray[default]==2.60.0' -> 'ray')."""
    match = _NAME.match(requirement.strip())
    return normalize(match.group(1)) if match else ""


def python_version(venv):
    """The venv's Python X.Y.Z from its pyvenv.cfg ('' when unreadable)."""
    try:
        with open(os.path.join(venv, "pyvenv.cfg")) as handle:
            for line in handle:
                key, _sep, value = line.partition("=")
                if key.strip() in ("version", "version_info"):
                    return ".".join(value.strip().split(".")[:3])
    except OSError:
        pass
    return ""


def site_packages(venv):
    """The venv's site-packages directories."""
    lib = os.path.join(venv, "lib")
    try:
        names = sorted(os.listdir(lib))
    except OSError:
        return []
    return [
        os.path.join(lib, n, "site-packages") for n in names if os.path.isdir(os.path.join(lib, n, "site-packages"))
    ]


def installed_versions(venv, names):
    """{normalized name: version} of the named distributions installed in the venv, from their .dist-info
    directories (a name not installed is absent)."""
    wanted = {normalize(n) for n in names}
    found = {}
    for directory in site_packages(venv):
        for entry in os.listdir(directory):
            if not entry.endswith(".dist-info"):
                continue
            name, _sep, version = entry[: -len(".dist-info")].rpartition("-")
            if normalize(name) in wanted:
                found[normalize(name)] = version
    return found
