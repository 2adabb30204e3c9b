#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_topology
short_description: Read a host's NVIDIA GPUs and their NVLink/PCIe topology, and check expectations
version_added: "0.1.0"
description:
  - Runs C(nvidia-smi --query-gpu=index,name,uuid,memory.total,pci.bus_id,driver_version,mig.mode.current
    --format=csv,noheader,nounits) and C(nvidia-smi topo -m) on the host and returns what they report.
  - Fails, naming the expectation and what was found, when O(expected_gpu_count), O(expected_gpu_name),
    O(min_driver_version) or O(require_nvlink) is not met.
  - Fails, saying that the NVIDIA driver is missing or broken and quoting nvidia-smi's error output, when
    nvidia-smi cannot be found or exits non-zero; fails naming and quoting the line when its output cannot be parsed.
  - Never reports a change. Check mode runs exactly as a normal run, since the module only reads.
author:
  - rayvllm.fleet maintainers (!UNKNOWN)
options:
  nvidia_smi:
    description:
      - The nvidia-smi executable, as a name looked up in E(PATH) (and the usual sbin directories) or a path.
    type: str
    default: nvidia-smi
  expected_gpu_count:
    description: Number of GPUs the host must have. Not checked when omitted.
    type: int
    required: false
  expected_gpu_name:
    description:
      - A substring every GPU's name must contain, compared case-insensitively, for example V(H100) matches
        C(NVIDIA H100 80GB HBM3). Not checked when omitted.
    type: str
    required: false
  min_driver_version:
    description:
      - Lowest acceptable NVIDIA driver version, compared numerically component by component
        (V(580.95.05) is newer than V(535.216.01); missing components count as 0). Not checked when omitted.
    type: str
    required: false
  require_nvlink:
    description:
      - Fail unless every distinct pair of GPUs is linked by NVLink (an C(NV#) label in C(nvidia-smi topo -m)),
        that is unless RV(nvlink_full_mesh) is true. A host with fewer than two GPUs fails this check.
    type: bool
    default: false
attributes:
  check_mode:
    description: Can run in check mode; it then runs exactly as in a normal run, since it only reads.
    support: full
  diff_mode:
    description: Returns no diff; the module never changes anything.
    support: none
notes:
  - MIG-enabled GPUs are listed once each, as physical GPUs, with RV(gpus[].mig_enabled=true); MIG instances are not
    listed.
  - NIC rows and columns of C(nvidia-smi topo -m) are left out of RV(topology).
"""

EXAMPLES = r"""
- name: Check an 8x H100 NVSwitch node
  rayvllm.fleet.gpu_topology:
    expected_gpu_count: 8
    expected_gpu_name: H100
    min_driver_version: "550.127.05"
    require_nvlink: true
  register: gpu

- name: Show the GPUs
  ansible.builtin.debug:
    msg: >-
      {{ gpu.gpu_count }} x {{ gpu.gpus[0].name }}, driver {{ gpu.driver_version }},
      NVLink mesh: {{ gpu.nvlink_full_mesh }}

- name: Only read, with nvidia-smi from a non-standard location
  rayvllm.fleet.gpu_topology:
    nvidia_smi: /usr/local/nvidia/bin/nvidia-smi
  register: gpu
"""

RETURN = r"""
gpu_count:
  description: Number of GPUs nvidia-smi lists (physical GPUs; MIG instances are not counted).
  returned: success and when an expectation is not met
  type: int
  sample: 8
driver_version:
  description: NVIDIA driver version as nvidia-smi prints it.
  returned: success and when an expectation is not met
  type: str
  sample: "550.127.05"
gpus:
  description: The GPUs, by index.
  returned: success and when an expectation is not met
  type: list
  elements: dict
  contains:
    index:
      description: nvidia-smi's GPU index.
      type: int
    name:
      description: Product name.
      type: str
    uuid:
      description: GPU UUID.
      type: str
    memory_total_mib:
      description: Total memory in MiB.
      type: int
    pci_bus_id:
      description: PCI bus id.
      type: str
    mig_enabled:
      description: Whether MIG mode is currently enabled (false for GPUs without MIG support).
      type: bool
  sample:
    - index: 0
      name: NVIDIA H100 80GB HBM3
      uuid: GPU-3f2a9c1e-6b7d-4e0a-9c85-1d2e3f4a5b60
      memory_total_mib: 81559
      pci_bus_id: "00000000:18:00.0"
      mig_enabled: false
topology:
  description:
    - Link labels between GPUs as C(nvidia-smi topo -m) prints them, row I(i) column I(j) for GPU I(i) to GPU I(j);
      C(X) on the diagonal, C(NV#) for NVLink, C(PIX), C(PXB), C(PHB), C(NODE), C(SYS) for PCIe paths.
    - NIC rows and columns are left out.
  returned: success and when an expectation is not met
  type: list
  elements: list
  sample: [["X", "NV18"], ["NV18", "X"]]
nvlink_full_mesh:
  description:
    - Whether every distinct pair of GPUs is linked by NVLink (C(NV#)). False on a host with fewer than two GPUs.
  returned: success and when an expectation is not met
  type: bool
  sample: true
numa_affinity:
  description:
    - NUMA affinity of each GPU, in GPU order, as C(nvidia-smi topo -m) prints it (for example C(0));
      null where it prints C(N/A) or has no C(NUMA Affinity) column.
  returned: success and when an expectation is not met
  type: list
  elements: str
  sample: ["0", "0", "1", "1"]
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.rayvllm.fleet.plugins.module_utils.backends.gpu_topology import (
    GpuTopologyError,
    check_expectations,
    collect,
    compare_versions,
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            nvidia_smi=dict(type="str", default="nvidia-smi"),
            expected_gpu_count=dict(type="int"),
            expected_gpu_name=dict(type="str"),
            min_driver_version=dict(type="str"),
            require_nvlink=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if p["expected_gpu_count"] is not None and p["expected_gpu_count"] < 0:
        module.fail_json(msg="expected_gpu_count must be >= 0, got %d" % p["expected_gpu_count"])
    if p["min_driver_version"]:
        try:
            compare_versions(p["min_driver_version"], "0")
        except ValueError as exc:
            module.fail_json(msg="min_driver_version: %s" % exc)

    nvidia_smi = p["nvidia_smi"]
    if "/" not in nvidia_smi:
        # Also looks in /sbin, /usr/sbin, /usr/local/sbin; when not found, running the bare
        # name makes collect() report the missing binary.
        nvidia_smi = module.get_bin_path(nvidia_smi) or nvidia_smi

    def run(argv):
        return module.run_command(argv, handle_exceptions=False)

    try:
        facts = collect(run, nvidia_smi)
    except GpuTopologyError as exc:
        module.fail_json(msg=str(exc))

    result = dict(changed=False, **facts)
    problems = check_expectations(
        facts,
        expected_gpu_count=p["expected_gpu_count"],
        expected_gpu_name=p["expected_gpu_name"],
        min_driver_version=p["min_driver_version"],
        require_nvlink=p["require_nvlink"],
    )
    if problems:
        module.fail_json(msg="GPU expectations not met: " + "; ".join(problems), **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
