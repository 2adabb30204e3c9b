# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""What preflight needs to know about a host, read in one go: the Python X.Y.Z of an interpreter, the size of
/dev/shm, the memory, the TCP ports listening and who holds them, which firewall runs (ufw, firewalld) and the
firewalld zones of some interfaces, and what some paths are.

Standard library only: the module ``rayvllm.fleet.host_probe`` runs it on the host's system Python. Every reader
takes the file or command it reads from as an argument, so the unit tests feed it recorded text.
"""

import os
import pwd
import re
import subprocess

_LISTEN = "0A"  # TCP state LISTEN in /proc/net/tcp
_SOCKET_RE = re.compile(r"^socket:\[(\d+)\]$")


def run(argv, timeout=20):
    """(exit status, stdout, stderr) of a command; a program that is missing or hangs gives 127 or 124."""
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except OSError as exc:
        return 127, "", str(exc)
    except subprocess.TimeoutExpired:
        return 124, "", "timed out after %d s" % timeout
    return proc.returncode, proc.stdout, proc.stderr


def python_version(interpreter, runner=run, running=None):
    """{"version": "3.11.2"} of an interpreter, or {"error": why it does not run}. The interpreter this code runs on
    (``running``: sys.executable) answers without a second process."""
    import platform
    import sys

    running = sys.executable if running is None else running
    try:
        same = bool(running) and os.path.realpath(interpreter) == os.path.realpath(running)
    except (TypeError, ValueError):
        same = False
    if same:
        return {"version": platform.python_version()}
    rc, out, err = runner([interpreter, "-c", "import platform; print(platform.python_version())"])
    version = out.strip()
    if rc != 0 or not re.match(r"^\d+\.\d+\.\d+", version):
        return {"error": (err or out).strip()[-300:] or "exit status %d" % rc}
    return {"version": version}


def size_mib(path):
    """The size of the filesystem holding ``path`` in MiB (0 when there is none)."""
    try:
        stat = os.statvfs(path)
    except OSError:
        return 0
    return stat.f_blocks * stat.f_frsize // (1024 * 1024)


def memory_mib(meminfo):
    """MemTotal of /proc/meminfo's text, in MiB (0 when absent)."""
    match = re.search(r"^MemTotal:\s+(\d+)\s+kB", meminfo, re.M)
    return int(match.group(1)) // 1024 if match else 0


def _address(hex_address):
    """The text form of /proc/net/tcp's hex address (IPv4 or IPv6, each 32-bit word little-endian)."""
    raw = bytes.fromhex(hex_address)
    words = [raw[i : i + 4][::-1] for i in range(0, len(raw), 4)]
    if len(raw) == 4:
        return ".".join(str(b) for b in words[0])
    groups = b"".join(words)
    text = ":".join("%x" % int.from_bytes(groups[i : i + 2], "big") for i in range(0, 16, 2))
    return re.sub(r"(^|:)0(:0)+(:|$)", "::", text, count=1)


def listeners(tables):
    """[{"address", "port", "uid", "inode"}] of every listening TCP socket, from the texts of /proc/net/tcp and
    /proc/net/tcp6 (``tables``)."""
    found = []
    for text in tables:
        for line in text.splitlines()[1:]:
            fields = line.split()
            if len(fields) < 10 or fields[3] != _LISTEN:
                continue
            address, _sep, port = fields[1].partition(":")
            try:
                found.append(
                    {"address": _address(address), "port": int(port, 16), "uid": int(fields[7]), "inode": fields[9]}
                )
            except ValueError:
                continue
    return found


def socket_owners(inodes, proc="/proc"):
    """{socket inode: (pid, program name)} of the processes that hold the given sockets (those whose /proc/<pid>/fd
    this user may read)."""
    owners, wanted = {}, set(inodes)
    if not wanted:
        return owners
    try:
        pids = [p for p in os.listdir(proc) if p.isdigit()]
    except OSError:
        return owners
    for pid in pids:
        fd_dir = os.path.join(proc, pid, "fd")
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        for fd in fds:
            try:
                match = _SOCKET_RE.match(os.readlink(os.path.join(fd_dir, fd)))
            except OSError:
                continue
            if match and match.group(1) in wanted and match.group(1) not in owners:
                try:
                    with open(os.path.join(proc, pid, "comm")) as handle:
                        name = handle.read().strip()
                except OSError:
                    name = "?"
                owners[match.group(1)] = (int(pid), name)
        if len(owners) == len(wanted):
            break
    return owners


def user_name(uid):
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def listening_ports(tables, ports=None, proc="/proc"):
    """[{"port", "address", "user", "pid", "name"}] of the sockets listening on ``ports`` (every listening socket
    when ``ports`` is None), sorted by port, each with the user that owns it and, where this user may see it, the
    process."""
    wanted = None if ports is None else set(int(p) for p in ports)
    found = [s for s in listeners(tables) if wanted is None or s["port"] in wanted]
    owners = socket_owners([s["inode"] for s in found], proc)
    result = []
    for sock in sorted(found, key=lambda s: (s["port"], s["address"])):
        pid, name = owners.get(sock["inode"], (None, "?"))
        result.append(
            {"port": sock["port"], "address": sock["address"], "user": user_name(sock["uid"]), "pid": pid, "name": name}
        )
    return result


def firewalls(runner=run):
    """Which firewall the host runs: "ufw" (``ufw status`` says active) and/or "firewalld" (its unit is active)."""
    found = []
    rc, out, _err = runner(["ufw", "status"])
    if rc == 0 and re.search(r"^Status: active", out, re.M):
        found.append("ufw")
    rc, _out, _err = runner(["systemctl", "is-active", "--quiet", "firewalld"])
    if rc == 0:
        found.append("firewalld")
    return found


def firewalld_zones(interfaces, runner=run):
    """[{"interface", "zone", "target"}] for each interface: the firewalld zone its traffic goes to (the default zone
    for an interface bound to none) and that zone's target (ACCEPT lets every port in)."""
    result = []
    default = None
    for interface in interfaces:
        rc, out, _err = runner(["firewall-cmd", "--get-zone-of-interface=%s" % interface])
        zone = out.strip() if rc == 0 else ""
        if not zone:
            if default is None:
                rc, out, _err = runner(["firewall-cmd", "--get-default-zone"])
                default = out.strip() if rc == 0 else ""
            zone = default
        rc, out, _err = runner(["firewall-cmd", "--info-zone", zone]) if zone else (1, "", "")
        match = re.search(r"^\s*target:\s*(\S+)", out, re.M) if rc == 0 else None
        result.append({"interface": interface, "zone": zone, "target": match.group(1) if match else ""})
    return result


def default_route_interface(route):
    """The interface of the IPv4 default route, from /proc/net/route's text ("" when there is none)."""
    for line in route.splitlines()[1:]:
        fields = line.split()
        if len(fields) > 2 and fields[1] == "00000000":
            return fields[0]
    return ""


def path_state(path):
    """What a path is: {"exists", "link", "dir", "config"} ("config": it is a directory holding config.json, the
    mark of a model's weights), and "real": where it resolves to."""
    return {
        "exists": os.path.lexists(path),
        "link": os.path.islink(path),
        "dir": os.path.isdir(path),
        "config": os.path.isfile(os.path.join(path, "config.json")),
        "real": os.path.realpath(path),
    }


def read(path):
    """The text of the file at path (UTF-8, undecodable bytes replaced); "" where it cannot be read."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return ""


def probe(python=None, shm="/dev/shm", ports=(), firewall_interfaces=(), paths=(), runner=run, proc="/proc"):
    """Everything at once: {"python", "shm_mib", "memory_mib", "listening", "firewalls", "firewalld_zones",
    "paths"}. ``ports`` None: every listening socket."""
    result = {
        "python": python_version(python, runner) if python else {},
        "shm_mib": size_mib(shm) if os.path.exists(shm) else 0,
        "memory_mib": memory_mib(read(os.path.join(proc, "meminfo"))),
        "listening": listening_ports([read(os.path.join(proc, "net", name)) for name in ("tcp", "tcp6")], ports, proc),
        "firewalls": firewalls(runner),
        "firewalld_zones": [],
        "paths": {path: path_state(path) for path in paths},
    }
    if "firewalld" in result["firewalls"]:
        # The zones that receive the host's traffic: the default route's interface (clients) and the given ones
        # (the node's cluster interface); the loopback's when there is neither.
        interfaces = [default_route_interface(read(os.path.join(proc, "net", "route")))] + list(firewall_interfaces)
        interfaces = [i for i in dict.fromkeys(interfaces) if i] or ["lo"]
        result["firewalld_zones"] = firewalld_zones(interfaces, runner)
    return result
