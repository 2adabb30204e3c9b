# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""Spread one staged revision of weights between the fleet's nodes: each byte leaves the controller once.

The model role copies a revision from the controller to one node (the seed); every other node that needs it runs
``share`` at the same time as the nodes that have it: each node serves what it has (its complete revision, or the
part it has received so far) over HTTP to its peers, and fetches what it lacks from the node before it in a chain
(``plan``). A node serves a file while it is still arriving, so the chain streams: the last node of a chain of eight
ends about when the first does, not seven transfers later. With several complete nodes (a node joining a fleet that
has the weights), the needy nodes form one chain per complete node.

- Every file is checked against the seed's manifest (size and SHA-256, computed once where the revision arrived and
  kept in it) as it arrives; a mismatch is fetched again from another peer, and the node and file are named.
- A transfer cut short resumes where it stopped: the next request asks for the bytes after what is on disk.
- A peer that goes away mid-transfer: the node goes on from the next peer that has the file (the node before it in its
  chain, back to the complete nodes).
- ``bwlimit`` caps what a node receives and what it sends (bytes per second; 0: none), so nodes that serve keep their
  network for their clients.
- Requests carry the run's token (a header, never a command line); a node answers only the files of its manifest.

Plain Python, no Ansible: the module ``model_share`` runs it on each node (as an async task: every node serves and
fetches at once), and the unit tests run it between threads.
"""

import hashlib
import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from http.client import HTTPConnection, HTTPException

MANIFEST = ".rayvllm-manifest.json"
# Files of the revision directory that are not part of the weights: the manifest itself and the marker the model
# role writes last.
NOT_SHARED = (MANIFEST, ".rayvllm-complete")
CHUNK = 1 << 20


class ShareError(Exception):
    """A node could not get the revision from any peer; the message names the node, the file and why."""


def build_manifest(directory):
    """Every file under ``directory`` (relative path, size, SHA-256), sorted by path; the marker and the manifest
    itself left out."""
    files = []
    for root, dirs, names in os.walk(directory):
        dirs.sort()
        for name in sorted(names):
            full = os.path.join(root, name)
            rel = os.path.relpath(full, directory)
            if rel in NOT_SHARED or not os.path.isfile(full):
                continue
            files.append({"path": rel, "size": os.path.getsize(full), "sha256": file_sha256(full).hexdigest()})
    files.sort(key=lambda entry: entry["path"])
    return {"files": files, "bytes": sum(entry["size"] for entry in files)}


def seed_manifest(directory):
    """The manifest of a complete revision: the one kept in it, else built and kept there (one SHA-256 pass)."""
    path = os.path.join(directory, MANIFEST)
    if os.path.isfile(path):
        with open(path) as handle:
            return json.load(handle)
    manifest = build_manifest(directory)
    with open(path, "w") as handle:
        json.dump(manifest, handle)
    return manifest


def file_sha256(path, limit=None):
    digest = hashlib.sha256()
    left = limit
    with open(path, "rb") as handle:
        while left is None or left > 0:
            block = handle.read(CHUNK if left is None else min(CHUNK, left))
            if not block:
                break
            digest.update(block)
            if left is not None:
                left -= len(block)
    return digest


def plan(members, complete):
    """For each member that lacks the revision, its sources in order of preference.

    ``members``: node names in the fleet's order; ``complete``: those that have the revision. The needy nodes are
    dealt round-robin into one chain per complete node; each fetches from the node before it in its chain (which may
    still be fetching: it serves what it has), then from the nodes before that, back to the chain's complete node, then
    from the other complete nodes. Returns ``{node: [source, ...]}`` for the needy nodes only; raises ValueError when
    no member has the revision.
    """
    seeds = [name for name in members if name in complete]
    needy = [name for name in members if name not in complete]
    if needy and not seeds:
        raise ValueError("no node has the revision to share: the seed must receive it from the controller first")
    sources = {}
    for index, seed in enumerate(seeds):
        chain = [seed] + needy[index :: len(seeds)]
        for position in range(1, len(chain)):
            before = list(reversed(chain[:position]))
            others = [name for name in seeds if name != seed]
            sources[chain[position]] = before + others
    return sources


def downstream(sources, node):
    """The nodes that may fetch from ``node``: it serves until each of them is done (or gone quiet)."""
    return sorted(name for name, upstream in sources.items() if node in upstream)


class RateLimit:
    """At most ``rate`` bytes per second over the calls to ``take`` (0: no limit); shared by threads."""

    def __init__(self, rate, clock=time.monotonic, sleep=time.sleep):
        self.rate = rate
        self.clock = clock
        self.sleep = sleep
        self.lock = threading.Lock()
        self.next_free = clock()

    def take(self, size):
        if not self.rate:
            return
        with self.lock:
            now = self.clock()
            start = max(now, self.next_free)
            self.next_free = start + float(size) / self.rate
            wait = self.next_free - now
        # Up to a second of credit (the first chunk) goes through at once; after that the average holds.
        if wait > 1.0:
            self.sleep(wait - 1.0)


class Shelf:
    """What one node holds of the revision: the complete directory, or the ``.partial`` one being filled."""

    def __init__(self, final, manifest=None):
        self.final = final
        self.partial = final + ".partial"
        self.manifest = manifest
        self.done = set()
        self.sent = 0  # bytes served to peers
        self.streams = 0  # transfers in progress
        self.lock = threading.Lock()
        self.last_request = time.monotonic()
        self.finished = threading.Event()

    def entry(self, rel):
        for entry in (self.manifest or {}).get("files", []):
            if entry["path"] == rel:
                return entry
        return None

    def local_path(self, rel):
        """Where the file is on this node now (the complete directory first), or None."""
        for base in (self.final, self.partial):
            path = os.path.join(base, rel)
            if os.path.isfile(path):
                return path
        return None


def _handler(shelf, token, limit, stall):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):  # the module's result reports, not stderr
            pass

        def _refuse(self, status, text):
            body = text.encode()
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _authorized(self):
            shelf.last_request = time.monotonic()
            if self.headers.get("Authorization") != "Bearer " + token:
                self._refuse(401, "the run's token is needed")
                return False
            return True

        def do_POST(self):  # noqa: N802 (http.server's name)
            if not self._authorized():
                return
            if self.path.startswith("/done/"):
                with shelf.lock:
                    shelf.done.add(self.path[len("/done/") :])
                self._refuse(200, "ok")
                return
            self._refuse(404, "unknown")

        def do_GET(self):  # noqa: N802 (http.server's name)
            if not self._authorized():
                return
            if self.path == "/manifest":
                if shelf.manifest is None:
                    self._refuse(503, "no manifest yet")
                    return
                body = json.dumps(shelf.manifest).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            rel = self.path[len("/file/") :] if self.path.startswith("/file/") else None
            entry = shelf.entry(rel) if rel else None
            if entry is None:
                self._refuse(404, "not a file of this revision")
                return
            start = 0
            wanted = self.headers.get("Range", "")
            if wanted.startswith("bytes=") and wanted.endswith("-"):
                start = int(wanted[len("bytes=") : -1] or 0)
            if start > entry["size"]:
                self._refuse(416, "past the end")
                return
            self._stream(rel, entry["size"], start)

        def _stream(self, rel, size, start):
            """The bytes from ``start`` to the file's final size, waiting for those not arrived yet (the node may be
            fetching the file itself); gives up after ``stall`` seconds without a new byte, and the client resumes
            elsewhere."""
            self.send_response(206 if start else 200)
            self.send_header("Content-Length", str(size - start))
            self.end_headers()
            offset, waited, handle = start, 0.0, None
            with shelf.lock:
                shelf.streams += 1
            try:
                while offset < size:
                    if handle is None:
                        path = shelf.local_path(rel)
                        if path is None or os.path.getsize(path) <= offset:
                            if waited >= stall:
                                return
                            time.sleep(0.1)
                            waited += 0.1
                            continue
                        handle = open(path, "rb")
                        handle.seek(offset)
                    block = handle.read(min(CHUNK, size - offset))
                    if not block:
                        handle.close()
                        handle = None
                        continue
                    waited = 0.0
                    limit.take(len(block))
                    self.wfile.write(block)
                    offset += len(block)
                    with shelf.lock:
                        shelf.sent += len(block)
            except OSError:  # the peer went away (broken pipe, reset, timeout)
                return
            finally:
                if handle is not None:
                    handle.close()
                self.close_connection = True
                with shelf.lock:
                    shelf.streams -= 1
                    shelf.last_request = time.monotonic()

    return Handler


def serve(shelf, address, port, token, limit, stall=60.0):
    """Start serving ``shelf`` on address:port in a thread; returns the server (``shutdown()`` stops it)."""
    server = ThreadingHTTPServer((address, port), _handler(shelf, token, limit, stall))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2})
    thread.daemon = True
    thread.start()
    return server


class Fetcher:
    """Fetches every file of the manifest into ``shelf.partial`` from ``sources`` (name -> (address, port))."""

    def __init__(self, node, shelf, sources, token, limit, timeout=30.0, attempts=3):
        self.node = node
        self.shelf = shelf
        self.sources = sources
        self.token = token
        self.limit = limit
        self.timeout = timeout
        self.attempts = attempts
        self.events = []
        self.received = 0
        # Peers that refused a connection after the manifest was read: gone (killed, rebooted), not asked again.
        self.gone = set()

    def _request(self, source, method, path, headers=None):
        address, port = self.sources[source]
        conn = HTTPConnection(address, port, timeout=self.timeout)
        all_headers = {"Authorization": "Bearer " + self.token}
        all_headers.update(headers or {})
        conn.request(method, path, headers=all_headers)
        return conn, conn.getresponse()

    def manifest(self):
        """The revision's manifest from the first peer that has it; peers that start later (or are still reading it
        themselves) are asked again for up to ``timeout`` seconds."""
        problems = []
        started = time.monotonic()
        while True:
            # The node before this one in its chain first: for a few seconds it alone (it may start a moment later
            # than this node), so that the chain streams instead of every node asking the seed.
            waited = time.monotonic() - started
            for source in list(self.sources)[: 1 if waited < min(10.0, self.timeout / 2) else None]:
                try:
                    conn, answer = self._request(source, "GET", "/manifest")
                    body = answer.read()
                    conn.close()
                except (OSError, HTTPException) as error:
                    problems.append("%s: %s" % (source, error))
                    continue
                if answer.status == 200:
                    return json.loads(body.decode())
                problems.append("%s: HTTP %s" % (source, answer.status))
            if waited > self.timeout:
                break
            time.sleep(0.5)
        raise ShareError(
            "%s could not read the revision's manifest from any peer (%s)" % (self.node, "; ".join(problems[-4:]))
        )

    def fetch_all(self):
        manifest = self.shelf.manifest
        for entry in manifest["files"]:
            self.fetch(entry)
        with open(os.path.join(self.shelf.partial, MANIFEST), "w") as handle:
            json.dump(manifest, handle)

    def fetch(self, entry):
        """One file: resumed from what is on disk, checked against the manifest; a mismatch fetched again from the
        next peer (named in ``events``)."""
        target = os.path.join(self.shelf.partial, entry["path"])
        parent = os.path.dirname(target)
        if not os.path.isdir(parent):
            os.makedirs(parent)
        order = list(self.sources)
        bad = set()
        # Bytes of the file that were on disk before this run (a transfer cut short): a mismatch may be theirs,
        # not the peer's, so the first mismatch after a resume does not count against the peer: the file is fetched
        # again whole, from the same peer on the next attempt when it is the only one.
        resumed = os.path.exists(target)
        for _attempt in range(self.attempts):
            for source in order:
                if source in bad or source in self.gone:
                    continue
                if os.path.exists(target) and os.path.getsize(target) > entry["size"]:
                    os.remove(target)
                have = os.path.getsize(target) if os.path.exists(target) else 0
                if have < entry["size"]:
                    try:
                        self._copy(source, entry, target, have)
                    except ConnectionRefusedError:
                        self.gone.add(source)
                        self.events.append(
                            "%s: %s went away (connection refused while fetching %s): not asked again"
                            % (self.node, source, entry["path"])
                        )
                        continue
                    except (OSError, HTTPException, ShareError) as error:
                        self.events.append("%s: %s from %s cut short (%s)" % (self.node, entry["path"], source, error))
                        continue
                if os.path.getsize(target) < entry["size"]:
                    continue
                if file_sha256(target).hexdigest() == entry["sha256"]:
                    return
                os.remove(target)
                if resumed:
                    resumed = False
                    self.events.append(
                        "%s: %s, resumed from an earlier transfer, does not match the revision's SHA-256: fetched "
                        "again whole" % (self.node, entry["path"])
                    )
                    continue
                self.events.append(
                    "%s: %s from %s does not match the revision's SHA-256: fetched again from another peer"
                    % (self.node, entry["path"], source)
                )
                bad.add(source)
        raise ShareError(
            "%s could not get %s (%d bytes) intact from any of its peers %s: %s"
            % (self.node, entry["path"], entry["size"], ", ".join(order), "; ".join(self.events[-3:]) or "no answer")
        )

    def _copy(self, source, entry, target, have):
        headers = {"Range": "bytes=%d-" % have} if have else {}
        conn, answer = self._request(source, "GET", "/file/" + entry["path"], headers)
        try:
            if answer.status not in (200, 206) or (have and answer.status != 206):
                raise ShareError("HTTP %s" % answer.status)
            got = 0
            with open(target, "ab") as handle:
                while True:
                    block = answer.read(CHUNK)
                    if not block:
                        break
                    self.limit.take(len(block))
                    handle.write(block)
                    got += len(block)
                    self.received += len(block)
            if have + got < entry["size"]:
                raise ShareError("it sent %d of the %d bytes after byte %d" % (got, entry["size"] - have, have))
        finally:
            conn.close()

    def report_done(self, upstream):
        for source in upstream:
            try:
                conn, answer = self._request(source, "POST", "/done/" + self.node)
                answer.read()
                conn.close()
            except (OSError, HTTPException):
                pass


def wait_for_downstream(shelf, expected, idle, poll=0.5):
    """Serve until every node in ``expected`` said it is done, or for ``idle`` seconds nothing was asked and nothing
    was being sent (a long transfer in progress is not idleness). Returns the nodes that never said they are done."""
    while True:
        with shelf.lock:
            missing = set(expected) - shelf.done
            quiet = not shelf.streams and time.monotonic() - shelf.last_request > idle
        if not missing:
            return []
        if quiet:
            return sorted(missing)
        time.sleep(poll)


def round_plan(hosts, shares, node):
    """One round of sharing, for ``node``: ``shares`` maps each host that recorded what it has (``round``, ``group``,
    ``complete``, ``address``) to that record; the members are the hosts, in ``hosts``' order, of ``node``'s round and
    group. When no member has the revision the first one is the seed: it receives the controller's copy, then counts
    as complete."""
    own = shares.get(node)
    if not own:
        raise ValueError("%s recorded nothing for this round" % node)
    members = [
        host
        for host in hosts
        if host in shares and shares[host].get("round") == own["round"] and shares[host].get("group") == own["group"]
    ]
    had = [host for host in members if _truthy(shares[host].get("complete"))]
    seed = "" if had else members[0]
    complete = had or [seed]
    sources = plan(members, set(complete))
    return {
        "members": members,
        "peers": [{"name": host, "address": shares[host]["address"]} for host in members],
        "complete": complete,
        "seed": seed,
        "sources": sources.get(node, []),
        "downstream": downstream(sources, node),
        "needy": sorted(sources),
    }


def _truthy(value):
    return value is True or str(value).strip().lower() in ("true", "yes", "1")


# The settings of one model's weights that the model role stages (roles/model/tasks/fleet.yml), with the model
# role's defaults for what a model of a ray_serve cluster leaves out.
STAGE_SETTINGS = {
    "model_path": "",
    "model_source": "hf",
    "model_hf_repo": "",
    "model_hf_revision": "",
    "model_hf_allow_unpinned": False,
    "model_controller_path": "",
    "model_size_gib": 0,
}


def stage_identity(settings):
    """What makes two nodes' models the same bytes: the controller's directory, or the hub's repository and
    revision. A model on shared storage is its path (nothing is copied)."""
    source = settings.get("model_source") or STAGE_SETTINGS["model_source"]
    if source == "controller":
        return "controller:%s" % str(settings.get("model_controller_path") or "").rstrip("/")
    if source == "hf":
        return "hf:%s@%s" % (settings.get("model_hf_repo") or "", settings.get("model_hf_revision") or "")
    return "%s:%s" % (source, settings.get("model_path") or "")


def stage_slots(hosts, models, node):
    """The fleet's models in one order, and ``node``'s settings for each: ``model`` (what makes it the same model on
    every node, :func:`stage_identity`), ``serves`` (whether ``node`` stages it) and, where it does, the settings.

    ``models`` maps each host to the settings of every model it stages (a vllm_serve node: one; a ray_serve node:
    one per entry of ray_serve_models). The list has the same length on every host: the model role stages slot k on
    every node that serves it in one round, so a model that two clusters serve enters the fleet once."""
    order = []
    for host in hosts:
        for settings in models.get(host) or []:
            identity = stage_identity(settings)
            if identity not in order:
                order.append(identity)
    own = {}
    for settings in models.get(node) or []:
        chosen = {key: value for key, value in settings.items() if key in STAGE_SETTINGS and value is not None}
        own.setdefault(stage_identity(settings), dict(STAGE_SETTINGS, serves=True, **chosen))
    return [dict(own.get(identity, {"serves": False}), model=identity) for identity in order]
