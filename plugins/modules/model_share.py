#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: model_share
short_description: Spread a staged revision of weights between peers, each node fetching from the one before it
version_added: "0.3.0"
description:
  - Run on every node of O(peers) at once (an async task). Each serves over HTTP what it holds of the revision
    O(path) (the complete directory, or the C(<path>.partial) directory it is filling), and each node without the
    complete revision fetches it into C(<path>.partial) from the peer before it in a chain (the chain streams, a
    node serves a file while it is still arriving), falling back to the peers before that.
  - The nodes that have the revision (its C(.rayvllm-complete) marker) are the sources; the needy ones are dealt
    into one chain per complete node, in the order of O(peers).
  - Every file is checked against the manifest (size and SHA-256) computed once where the revision arrived from the
    controller; a mismatch is fetched again from another peer and named in RV(events). A transfer cut short
    resumes where it stopped.
  - The module does not rename C(<path>.partial); the caller marks the revision complete once every node has it.
  - Each node serves until every node that may fetch from it said it is done, or no request came for O(idle)
    seconds.
author:
  - rayvllm.fleet maintainers (!UNKNOWN)
options:
  path:
    description: The revision's directory on this node (complete, or to be filled through C(<path>.partial)).
    type: path
    required: true
  node:
    description: This node's name in O(peers).
    type: str
    required: true
  peers:
    description: Every node that shares this revision, in the fleet's order, each with the address it serves on.
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description: The node's inventory name.
        type: str
        required: true
      address:
        description: The address its peers reach it on.
        type: str
        required: true
  complete:
    description: The nodes of O(peers) that have the complete revision when the run starts.
    type: list
    elements: str
    required: true
  port:
    description: The TCP port every node serves on.
    type: int
    required: true
  token:
    description: The run's shared secret; requests without it are refused.
    type: str
    required: true
  bwlimit:
    description: Bytes per second this node may receive, and send, at most; C(0) for no limit.
    type: int
    default: 0
  owner:
    description: Owner of the fetched files.
    type: str
    default: root
  group:
    description: Group of the fetched files.
    type: str
    default: root
  stall:
    description: Seconds a transfer may wait for a byte (a peer that is still receiving the file) before it moves to
      another peer.
    type: float
    default: 60
  idle:
    description: Seconds without a request after which a node stops serving, even if some peer never said it is
      done.
    type: float
    default: 120
attributes:
  check_mode:
    description: Reports whether this node would fetch the revision; nothing is served or fetched.
    support: full
  diff_mode:
    description: Not supported.
    support: none
"""

EXAMPLES = r"""
- name: Spread the revision from the node that received it
  rayvllm.fleet.model_share:
    path: /srv/models/llama.revisions/controller-0123abcd
    node: "{{ inventory_hostname }}"
    peers: [{name: node-a, address: 10.0.0.1}, {name: node-b, address: 10.0.0.2}]
    complete: [node-a]
    port: 29870
    token: "{{ run_token }}"
  async: 3600
  poll: 0
"""

RETURN = r"""
fetched_bytes:
  description: Bytes this node received from its peers.
  returned: always
  type: int
  sample: 2147483648
sources:
  description: The peers this node fetches from, in order of preference (empty on a node that had the revision).
  returned: always
  type: list
  elements: str
  sample: ["node-a"]
served:
  description: The peers that said they are done with what this node served them.
  returned: always
  type: list
  elements: str
  sample: ["node-b"]
quiet:
  description: The peers that might have fetched from this node and never said they are done (gone quiet).
  returned: always
  type: list
  elements: str
  sample: []
events:
  description: Transfers cut short and files that did not match their checksum, each naming the node, file and peer.
  returned: always
  type: list
  elements: str
  sample:
    - "node-c: model.safetensors from node-b does not match the revision's SHA-256: fetched again from another peer"
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.rayvllm.fleet.plugins.module_utils.backends import model_share


def _own(module, directory):
    for root, dirs, names in os.walk(directory):
        for name in dirs:
            module.set_owner_if_different(os.path.join(root, name), module.params["owner"], False)
            module.set_group_if_different(os.path.join(root, name), module.params["group"], False)
            os.chmod(os.path.join(root, name), 0o755)
        for name in names:
            module.set_owner_if_different(os.path.join(root, name), module.params["owner"], False)
            module.set_group_if_different(os.path.join(root, name), module.params["group"], False)
            os.chmod(os.path.join(root, name), 0o644)
    os.chmod(directory, 0o755)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            node=dict(type="str", required=True),
            peers=dict(
                type="list",
                elements="dict",
                required=True,
                options=dict(name=dict(type="str", required=True), address=dict(type="str", required=True)),
            ),
            complete=dict(type="list", elements="str", required=True),
            port=dict(type="int", required=True),
            token=dict(type="str", required=True, no_log=True),
            bwlimit=dict(type="int", default=0),
            owner=dict(type="str", default="root"),
            group=dict(type="str", default="root"),
            stall=dict(type="float", default=60),
            idle=dict(type="float", default=120),
        ),
        supports_check_mode=True,
    )
    params = module.params
    final, node = params["path"].rstrip("/"), params["node"]
    names = [peer["name"] for peer in params["peers"]]
    addresses = {peer["name"]: peer["address"] for peer in params["peers"]}
    if node not in addresses:
        module.fail_json(msg="node %s is not one of the peers %s" % (node, ", ".join(names)))
    try:
        plan = model_share.plan(names, set(params["complete"]))
    except ValueError as error:
        module.fail_json(msg=str(error))
    sources = plan.get(node, [])
    result = dict(changed=bool(sources), fetched_bytes=0, sources=sources, served=[], quiet=[], events=[])
    if module.check_mode:
        module.exit_json(**result)

    shelf = model_share.Shelf(final)
    if not sources:
        shelf.manifest = model_share.seed_manifest(final)
    limit = model_share.RateLimit(params["bwlimit"])
    try:
        server = model_share.serve(shelf, addresses[node], params["port"], params["token"], limit, params["stall"])
    except OSError as error:
        module.fail_json(
            msg="%s cannot serve the weights to its peers on %s:%d (%s): is model_distribution_port free there?"
            % (node, addresses[node], params["port"], error),
            **result,
        )
    try:
        if sources:
            fetcher = model_share.Fetcher(
                node,
                shelf,
                dict((name, (addresses[name], params["port"])) for name in sources),
                params["token"],
                limit,
                timeout=params["stall"],
            )
            try:
                shelf.manifest = fetcher.manifest()
                if not os.path.isdir(shelf.partial):
                    os.makedirs(shelf.partial)
                fetcher.fetch_all()
            except (model_share.ShareError, OSError) as error:
                result.update(fetched_bytes=fetcher.received, events=fetcher.events)
                fetcher.report_done(sources)  # its peers stop waiting for it
                module.fail_json(msg=str(error), **result)
            _own(module, shelf.partial)
            result.update(fetched_bytes=fetcher.received, events=fetcher.events)
            fetcher.report_done(sources)
        expected = model_share.downstream(plan, node)
        quiet = model_share.wait_for_downstream(shelf, expected, params["idle"])
        result.update(served=sorted(set(expected) - set(quiet)), quiet=quiet)
    finally:
        server.shutdown()
        server.server_close()
    module.exit_json(**result)


if __name__ == "__main__":
    main()
