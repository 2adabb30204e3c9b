import json
import os
import subprocess
import sys

import pytest
from conftest import FIXTURES, ROOT

from ansible_collections.rayvllm.fleet.plugins.module_utils.backends import gpu_topology as gt

SMI = FIXTURES / "nvidia-smi"
FAKE = SMI / "fake-nvidia-smi"
MODULE = ROOT / "plugins" / "modules" / "gpu_topology.py"
SYSTEMS = sorted(p.name for p in SMI.iterdir() if p.is_dir())


def read(system, name):
    return (SMI / system / name).read_text()


def fixture_runner(system, calls=None):
    """A ``run(argv)`` that answers like nvidia-smi on ``system``."""

    def run(argv):
        if calls is not None:
            calls.append(list(argv))
        if argv[1].startswith("--query-gpu="):
            return 0, read(system, "query.csv"), ""
        if argv[1:] == ["topo", "-m"]:
            return 0, read(system, "topo.txt"), ""
        raise AssertionError("unexpected command %r" % (argv,))

    return run


def facts_of(system):
    return gt.collect(fixture_runner(system))


# ---------------------------------------------------------------- fixtures


def test_every_fixture_folder_has_both_outputs():
    assert len(SYSTEMS) >= 6
    for system in SYSTEMS:
        assert (SMI / system / "query.csv").is_file(), system
        assert (SMI / system / "topo.txt").is_file(), system


def test_h100_nvswitch_8gpu():
    f = facts_of("h100-sxm5-nvswitch-8gpu")
    assert f["gpu_count"] == 8
    assert f["driver_version"] == "550.127.05"
    assert [g["index"] for g in f["gpus"]] == list(range(8))
    assert {g["name"] for g in f["gpus"]} == {"NVIDIA H100 80GB HBM3"}
    assert {g["memory_total_mib"] for g in f["gpus"]} == {81559}
    assert f["gpus"][0]["pci_bus_id"] == "00000000:18:00.0"
    assert f["gpus"][7]["pci_bus_id"] == "00000000:DB:00.0"
    assert f["gpus"][0]["uuid"].startswith("GPU-") and len(f["gpus"][0]["uuid"]) == 40
    assert not any(g["mig_enabled"] for g in f["gpus"])
    # 8x8, the 8 NIC columns are dropped
    assert len(f["topology"]) == 8 and all(len(row) == 8 for row in f["topology"])
    assert f["topology"][0] == ["X"] + ["NV18"] * 7
    assert f["topology"][5][5] == "X" and f["topology"][5][4] == "NV18"
    assert f["nvlink_full_mesh"] is True
    assert f["numa_affinity"] == ["0"] * 4 + ["1"] * 4
    assert set(f) == {"gpu_count", "driver_version", "gpus", "topology", "nvlink_full_mesh", "numa_affinity"}


def test_h100_topology_details_nics_and_affinity():
    t = gt.parse_topology(read("h100-sxm5-nvswitch-8gpu", "topo.txt"))
    assert t["nics"] == ["NIC%d" % i for i in range(8)]
    assert t["nic_legend"] == {"NIC%d" % i: "mlx5_%d" % i for i in range(8)}
    assert t["cpu_affinity"] == ["0-55,112-167"] * 4 + ["56-111,168-223"] * 4
    assert t["gpu_numa_id"] == [None] * 8
    assert all("PXB" not in row and "NODE" not in row for row in t["matrix"])


def test_a100_sxm4_8gpu_ansi_header():
    raw = read("a100-sxm4-8gpu", "topo.txt")
    assert "\x1b[4m" in raw  # the fixture really carries the tty escape codes
    f = facts_of("a100-sxm4-8gpu")
    assert f["gpu_count"] == 8
    assert f["driver_version"] == "535.216.01"
    assert f["gpus"][3]["name"] == "NVIDIA A100-SXM4-80GB"
    assert f["gpus"][3]["memory_total_mib"] == 81920
    assert all(c in ("X", "NV12") for row in f["topology"] for c in row)
    assert [f["topology"][i][i] for i in range(8)] == ["X"] * 8
    assert f["nvlink_full_mesh"] is True
    assert f["numa_affinity"] == ["3", "3", "1", "1", "7", "7", "5", "5"]


def test_l40s_pcie_mixed_links_and_nics_excluded():
    f = facts_of("l40s-pcie-4gpu")
    assert f["gpu_count"] == 4
    assert f["driver_version"] == "570.86.15"
    assert f["gpus"][2]["memory_total_mib"] == 46068
    assert [g["mig_enabled"] for g in f["gpus"]] == [False] * 4  # [N/A]
    assert f["topology"] == [
        ["X", "PIX", "SYS", "SYS"],
        ["PIX", "X", "SYS", "SYS"],
        ["SYS", "SYS", "X", "PHB"],
        ["SYS", "SYS", "PHB", "X"],
    ]
    assert f["nvlink_full_mesh"] is False
    assert f["numa_affinity"] == ["0", "0", "1", "1"]
    t = gt.parse_topology(read("l40s-pcie-4gpu", "topo.txt"))
    assert t["nics"] == ["NIC0", "NIC1"]
    assert t["nic_legend"] == {"NIC0": "mlx5_0", "NIC1": "mlx5_1"}


def test_single_gpu_numa_na_is_null():
    f = facts_of("l4-single-gpu")
    assert f["gpu_count"] == 1
    assert f["gpus"] == [
        {
            "index": 0,
            "name": "NVIDIA L4",
            "uuid": "GPU-717004f6-11fa-357e-8853-4989c162ff76",
            "memory_total_mib": 23034,
            "pci_bus_id": "00000000:00:03.0",
            "mig_enabled": False,
        }
    ]
    assert f["topology"] == [["X"]]
    assert f["nvlink_full_mesh"] is False  # documented: fewer than 2 GPUs is no mesh
    assert f["numa_affinity"] == [None]


def test_mig_enabled_gpu():
    f = facts_of("a100-pcie-2gpu-mig")
    assert [g["mig_enabled"] for g in f["gpus"]] == [True, False]
    assert f["gpus"][0]["name"] == "NVIDIA A100 80GB PCIe"
    assert f["topology"] == [["X", "NV12"], ["NV12", "X"]]
    assert f["nvlink_full_mesh"] is True


def test_degraded_nvlink_fixture():
    f = facts_of("h100-sxm5-nvswitch-8gpu-gpu5-nvlink-down")
    assert f["nvlink_full_mesh"] is False
    pairs = gt.non_nvlink_pairs(f["topology"])
    labels = {(i, j): label for i, j, label in pairs}
    assert list(labels) == [(0, 5), (1, 5), (2, 5), (3, 5), (4, 5), (5, 6), (5, 7)]
    assert labels[(0, 5)] == "SYS"
    assert labels[(4, 5)] == "NODE"


def test_collect_runs_exactly_the_two_commands():
    calls = []
    gt.collect(fixture_runner("l4-single-gpu", calls), "/opt/nv/nvidia-smi")
    assert calls == [
        [
            "/opt/nv/nvidia-smi",
            "--query-gpu=index,name,uuid,memory.total,pci.bus_id,driver_version,mig.mode.current",
            "--format=csv,noheader,nounits",
        ],
        ["/opt/nv/nvidia-smi", "topo", "-m"],
    ]


# ---------------------------------------------------------------- parsing details


def test_older_driver_without_gpu_numa_id_and_space_separated_paste():
    tabbed = (
        "\tGPU0\tGPU1\tGPU2\tCPU Affinity\tNUMA Affinity\nGPU0\t X \tNV4\tNODE\t0-31,64-95\t0\n"
        "GPU1\tNV4\t X \tNODE\t0-31,64-95\t0\nGPU2\tNODE\tNODE\t X \t0-31,64-95\t0\n\nLegend:\n\n  X    = Self\n"
    )
    t = gt.parse_topology(tabbed)
    assert t["matrix"][0] == ["X", "NV4", "NODE"]
    assert t["numa_affinity"] == ["0", "0", "0"]
    assert t["gpu_numa_id"] == [None, None, None]
    pasted = tabbed.replace("\t", "    ")
    assert gt.parse_topology(pasted)["matrix"] == t["matrix"]
    assert gt.parse_topology(pasted)["cpu_affinity"] == ["0-31,64-95"] * 3


def test_ansi_everywhere_is_stripped():
    text = (
        "\t\x1b[4mGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m\n"
        "\x1b[1mGPU0\x1b[0m\t X \tNV18\t0-59\t0\t\tN/A\n\x1b[1mGPU1\x1b[0m\tNV18\t X \t0-59\t0\t\tN/A\n"
    )
    t = gt.parse_topology(text)
    assert t["matrix"] == [["X", "NV18"], ["NV18", "X"]]
    assert t["numa_affinity"] == ["0", "0"]
    line = "\x1b[1m0, NVIDIA H100 80GB HBM3, GPU-1, 81559, 00000000:18:00.0, 570.86.15, Disabled\n"
    driver, gpus = gt.parse_query(line)
    assert driver == "570.86.15"
    assert gpus[0]["name"] == "NVIDIA H100 80GB HBM3"


def test_query_sorted_by_index_and_blank_lines_ignored():
    text = (
        "\n1, NVIDIA L40S, GPU-b, 46068, 00000000:52:00.0, 570.86.15, [N/A]\n\n"
        "0, NVIDIA L40S, GPU-a, 46068, 00000000:4F:00.0, 570.86.15, [N/A]\n"
    )
    driver, gpus = gt.parse_query(text)
    assert driver == "570.86.15"
    assert [g["uuid"] for g in gpus] == ["GPU-a", "GPU-b"]


@pytest.mark.parametrize(
    "line, reason",
    [
        ("0, NVIDIA H100 80GB HBM3, GPU-1, 81559, 00000000:18:00.0, 550.127.05", "expected 7 comma-separated"),
        ("x, NVIDIA H100 80GB HBM3, GPU-1, 81559, 00000000:18:00.0, 550.127.05, Disabled", "index 'x'"),
        ("0, NVIDIA H100 80GB HBM3, GPU-1, 81559 MiB, 00000000:18:00.0, 550.127.05, Disabled", "'81559 MiB'"),
        ("0, NVIDIA H100 80GB HBM3, GPU-1, 81559, 00000000:18:00.0, 550.127.05, Pending", "'Pending'"),
    ],
)
def test_unparseable_query_line_is_named_and_quoted(line, reason):
    good = "0, NVIDIA H100 80GB HBM3, GPU-0, 81559, 00000000:17:00.0, 550.127.05, Disabled\n"
    with pytest.raises(gt.ParseError) as err:
        gt.parse_query(good.replace("0,", "1,", 1) + line + "\n")
    msg = str(err.value)
    assert "line 2 of the nvidia-smi GPU query output" in msg
    assert repr(line) in msg
    assert reason in msg


def test_duplicate_gpu_index_rejected():
    line = "0, NVIDIA L4, GPU-0, 23034, 00000000:00:03.0, 570.86.15, [N/A]\n"
    with pytest.raises(gt.ParseError, match="line 2 .*listed twice"):
        gt.parse_query(line + line)


def test_unparseable_topology_line_is_named_and_quoted():
    lines = read("l40s-pcie-4gpu", "topo.txt").splitlines(True)
    lines[3] = "GPU2\tSYS\tSYS\t X \tPHB\n"  # truncated row
    with pytest.raises(gt.ParseError) as err:
        gt.parse_topology("".join(lines))
    assert "line 4 of the nvidia-smi topo -m output" in str(err.value)
    assert repr("GPU2\tSYS\tSYS\t X \tPHB") in str(err.value)


@pytest.mark.parametrize(
    "row, reason",
    [
        ("garbage here\n", "not a GPU or NIC row"),
        ("GPU1\t X \tP!X\t0-7\t0\n", "'P!X' is not a link label"),
        ("GPU1\tPIX\tPIX\t0-7\t0\n", "GPU1 is not X against itself"),
        ("GPU2\tPIX\t X \t0-7\t0\n", "expected the row of GPU1"),
    ],
)
def test_bad_topology_rows(row, reason):
    text = "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\nGPU0\t X \tPIX\t0-7\t0\n" + row
    with pytest.raises(gt.ParseError) as err:
        gt.parse_topology(text)
    assert "line 3 of the nvidia-smi topo -m output" in str(err.value)
    assert repr(row.rstrip("\n")) in str(err.value)
    assert reason in str(err.value)


def test_nic_cells_are_validated_too():
    lines = read("l40s-pcie-4gpu", "topo.txt").splitlines(True)
    assert lines[1].startswith("GPU0\t X \tPIX\tSYS\tSYS\tPIX\t")
    lines[1] = lines[1].replace("SYS\tPIX\t", "SYS\t??\t", 1)  # GPU0 -> NIC0 cell
    with pytest.raises(gt.ParseError, match=r"line 2 of .*'\?\?' is not a link label"):
        gt.parse_topology("".join(lines))
    lines = read("l40s-pcie-4gpu", "topo.txt").splitlines(True)
    assert lines[5].startswith("NIC0\t")
    lines[5] = "NIC0\tPIX\tPIX\tSYS\n"  # truncated NIC row
    with pytest.raises(gt.ParseError, match="line 6 of .*3 link cells, the header has 6 GPU/NIC columns"):
        gt.parse_topology("".join(lines))


def test_topology_without_header_or_with_missing_rows():
    with pytest.raises(gt.ParseError, match=r"no header line starting with GPU0 found \(first line: 'No devices"):
        gt.parse_topology("No devices were found\n")
    with pytest.raises(gt.ParseError, match="2 GPU columns but 1 GPU rows"):
        gt.parse_topology("\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV4\t0-7\n\nLegend:\n")


def test_query_and_topology_disagreeing_on_count_fails():
    def run(argv):
        if argv[1] == "topo":
            return 0, read("l40s-pcie-4gpu", "topo.txt"), ""
        return 0, read("h100-sxm5-nvswitch-8gpu", "query.csv"), ""

    with pytest.raises(gt.ParseError, match="8 GPUs in the GPU query but 4 GPUs in topo -m"):
        gt.collect(run)


# ---------------------------------------------------------------- versions


@pytest.mark.parametrize(
    "a, b, expected",
    [
        ("580.95.05", "535.216.01", 1),
        ("535.216.01", "580.95.05", -1),
        ("550.127.05", "550.127.5", 0),
        ("550.127.05", "550.127.08", -1),
        ("550", "550.0.0", 0),
        ("550.54.15", "550.127.05", -1),  # numeric, not string, comparison
        ("570.86.15", "570.86", 1),
    ],
)
def test_compare_versions(a, b, expected):
    assert gt.compare_versions(a, b) == expected


@pytest.mark.parametrize("bad", ["", "abc", "550.x", "550..1", "v550.1"])
def test_compare_versions_rejects_non_numeric(bad):
    with pytest.raises(ValueError, match="not a dotted numeric version"):
        gt.compare_versions(bad, "1")


# ---------------------------------------------------------------- expectations


def test_all_expectations_met_gives_no_problem():
    f = facts_of("h100-sxm5-nvswitch-8gpu")
    assert gt.check_expectations(f, 8, "H100", "550.127.05", True) == []
    assert gt.check_expectations(f, 8, "h100 80gb", "535.216.01", True) == []  # case-insensitive
    assert gt.check_expectations(f) == []


def test_expected_gpu_count():
    f = facts_of("h100-sxm5-nvswitch-8gpu")
    f = dict(f, gpu_count=7, gpus=f["gpus"][:7])
    assert gt.check_expectations(f, expected_gpu_count=8) == ["expected 8 GPUs, found 7"]
    assert gt.check_expectations(facts_of("l4-single-gpu"), expected_gpu_count=2) == ["expected 2 GPUs, found 1"]
    assert gt.check_expectations(facts_of("l40s-pcie-4gpu"), expected_gpu_count=1) == ["expected 1 GPU, found 4"]


def test_expected_gpu_name():
    f = facts_of("a100-sxm4-8gpu")
    f["gpus"][6]["name"] = "NVIDIA A100-SXM4-40GB"
    assert gt.check_expectations(f, expected_gpu_name="A100-SXM4-80GB") == [
        "expected every GPU name to contain 'A100-SXM4-80GB', found 'NVIDIA A100-SXM4-40GB' (GPU 6)"
    ]
    problems = gt.check_expectations(facts_of("l40s-pcie-4gpu"), expected_gpu_name="H100")
    assert problems == ["expected every GPU name to contain 'H100', found 'NVIDIA L40S' (GPU 0, 1, 2, 3)"]
    f = facts_of("a100-sxm4-8gpu")
    f["gpus"][2]["name"] = "NVIDIA A100-SXM4-40GB"
    f["gpus"][5]["name"] = "NVIDIA A100-PCIE-40GB"
    f["gpus"][7]["name"] = "NVIDIA A100-SXM4-40GB"
    assert gt.check_expectations(f, expected_gpu_name="80GB") == [
        "expected every GPU name to contain '80GB', found 'NVIDIA A100-SXM4-40GB' (GPU 2, 7), "
        "'NVIDIA A100-PCIE-40GB' (GPU 5)"
    ]
    empty = {"gpu_count": 0, "gpus": [], "driver_version": "", "topology": [], "nvlink_full_mesh": False}
    assert gt.check_expectations(empty, expected_gpu_name="H100") == ["expected GPUs named like 'H100', found no GPU"]


def test_min_driver_version():
    f = facts_of("a100-sxm4-8gpu")  # 535.216.01
    assert gt.check_expectations(f, min_driver_version="550.54.15") == [
        "expected driver version >= 550.54.15, found 535.216.01"
    ]
    assert gt.check_expectations(f, min_driver_version="535.216.01") == []
    assert gt.check_expectations(f, min_driver_version="535.104.12") == []
    f["driver_version"] = "[N/A]"
    assert gt.check_expectations(f, min_driver_version="535") == [
        "expected driver version >= 535, found '[N/A]' which is not a numeric version"
    ]


def test_require_nvlink():
    problems = gt.check_expectations(facts_of("l40s-pcie-4gpu"), require_nvlink=True)
    assert problems == [
        "expected all GPU pairs linked by NVLink (NV#), found 6 pairs without: GPU0-GPU1 PIX, GPU0-GPU2 SYS, "
        "GPU0-GPU3 SYS, GPU1-GPU2 SYS, GPU1-GPU3 SYS, GPU2-GPU3 PHB"
    ]
    degraded = gt.check_expectations(facts_of("h100-sxm5-nvswitch-8gpu-gpu5-nvlink-down"), require_nvlink=True)
    assert len(degraded) == 1 and "found 7 pairs without: GPU0-GPU5 SYS" in degraded[0]
    assert gt.check_expectations(facts_of("l4-single-gpu"), require_nvlink=True) == [
        "expected all GPUs linked by NVLink, found 1 GPU (no NVLink mesh)"
    ]
    assert gt.check_expectations(facts_of("a100-pcie-2gpu-mig"), require_nvlink=True) == []


def test_require_nvlink_lists_at_most_eight_pairs():
    topology = [["X" if i == j else "SYS" for j in range(8)] for i in range(8)]
    facts = {"gpu_count": 8, "gpus": [], "driver_version": "1", "topology": topology, "nvlink_full_mesh": False}
    (problem,) = gt.check_expectations(facts, require_nvlink=True)
    assert "found 28 pairs without" in problem and problem.endswith("and 20 more")


def test_several_problems_reported_together():
    problems = gt.check_expectations(facts_of("l40s-pcie-4gpu"), 8, "H100", "580.95.05", True)
    assert len(problems) == 4
    assert problems[0] == "expected 8 GPUs, found 4"
    assert problems[2] == "expected driver version >= 580.95.05, found 570.86.15"


# ---------------------------------------------------------------- tensor-parallel groups


def test_tp_groups():
    assert gt.tp_groups(8, 4) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert gt.tp_groups(8, 3) == [[0, 1, 2], [3, 4, 5]]
    assert gt.tp_groups(2, 4) == []
    with pytest.raises(ValueError):
        gt.tp_groups(8, 0)


def test_tp_groups_nvlink_ok():
    full = facts_of("h100-sxm5-nvswitch-8gpu")["topology"]
    degraded = facts_of("h100-sxm5-nvswitch-8gpu-gpu5-nvlink-down")["topology"]
    pcie = facts_of("l40s-pcie-4gpu")["topology"]
    assert [gt.tp_groups_nvlink_ok(full, tp) for tp in (1, 2, 4, 8)] == [True] * 4
    assert gt.tp_groups_nvlink_ok(full, 16) is False  # no group fits
    # GPU5 lost NVLink: tp=4 group 4-7 broken, tp=2 pair 4-5 broken
    assert gt.tp_groups_nvlink_ok(degraded, 4) is False
    assert gt.tp_groups_nvlink_ok(degraded, 2) is False
    assert gt.tp_groups_nvlink_ok(degraded, 1) is True
    # only the first 5 GPUs (0..4) form a group with tp=5; GPU5 is left over
    assert gt.tp_groups_nvlink_ok(degraded, 5) is True
    assert gt.tp_groups_nvlink_ok(degraded, 3) is False  # group 3-4-5
    assert gt.tp_groups_nvlink_ok(pcie, 2) is False
    assert gt.tp_groups_nvlink_ok(pcie, 1) is True
    assert gt.tp_groups_nvlink_ok(facts_of("a100-pcie-2gpu-mig")["topology"], 2) is True
    assert gt.tp_groups_nvlink_ok([], 1) is False


# ---------------------------------------------------------------- nvidia-smi missing / failing


def test_missing_nvidia_smi():
    def run(argv):
        raise FileNotFoundError(2, "No such file or directory", argv[0])

    with pytest.raises(gt.NvidiaSmiError) as err:
        gt.collect(run)
    msg = str(err.value)
    assert msg.startswith("cannot run nvidia-smi (")
    assert "No such file or directory" in msg
    assert "the NVIDIA driver is missing or not installed on this host" in msg


def test_nvidia_smi_error_includes_output():
    driver_msg = (
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
        "Make sure that the latest NVIDIA driver is installed and running."
    )

    def run(argv):
        return 9, "", driver_msg + "\n"

    with pytest.raises(gt.NvidiaSmiError) as err:
        gt.collect(run)
    msg = str(err.value)
    assert "--query-gpu=index,name" in msg and "failed with rc 9" in msg
    assert "the NVIDIA driver is missing or broken" in msg
    assert msg.endswith(driver_msg)

    def run_stdout_only(argv):  # the real nvidia-smi prints some errors on stdout
        return 6, "No devices were found\n", ""

    with pytest.raises(gt.NvidiaSmiError, match="rc 6: .*nvidia-smi said: No devices were found$"):
        gt.collect(run_stdout_only)


def test_topo_failure_after_query_success():
    def run(argv):
        if argv[1] == "topo":
            return 255, "", "Failed to initialize NVML: Unknown Error"
        return 0, read("l4-single-gpu", "query.csv"), ""

    with pytest.raises(gt.NvidiaSmiError, match="`nvidia-smi topo -m` failed with rc 255.*Unknown Error"):
        gt.collect(run)


# ---------------------------------------------------------------- fake nvidia-smi and the real module


def run_fake(args, fixture_dir, log=None):
    env = dict(os.environ, FAKE_NVIDIA_SMI_DIR=str(fixture_dir))
    if log:
        env["FAKE_NVIDIA_SMI_LOG"] = str(log)
    return subprocess.run([str(FAKE)] + args, capture_output=True, text=True, env=env, check=False)


def test_fake_nvidia_smi_prints_fixtures(tmp_path):
    d = SMI / "h100-sxm5-nvswitch-8gpu"
    assert os.access(FAKE, os.X_OK)
    q = run_fake(gt.query_command()[1:], d)
    assert q.returncode == 0 and q.stdout == read("h100-sxm5-nvswitch-8gpu", "query.csv")
    t = run_fake(["topo", "-m"], d)
    assert t.returncode == 0 and t.stdout == read("h100-sxm5-nvswitch-8gpu", "topo.txt")
    listing = run_fake(["-L"], d)
    assert listing.stdout.splitlines()[0].startswith("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-")
    bad = run_fake(["--bogus"], d)
    assert bad.returncode == 2 and "unsupported arguments: --bogus" in bad.stderr
    (tmp_path / "fail").write_text("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n")
    failed = run_fake(["topo", "-m"], tmp_path)
    assert failed.returncode == 9 and failed.stdout == ""
    assert "couldn't communicate" in failed.stderr


def run_module(tmp_path, args, fixture_dir=None):
    (tmp_path / "args.json").write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    env = dict(os.environ, PYTHONPATH=str(ROOT / "collections"), FAKE_NVIDIA_SMI_LOG=str(tmp_path / "calls.log"))
    if fixture_dir is not None:
        env["FAKE_NVIDIA_SMI_DIR"] = str(fixture_dir)
    proc = subprocess.run(
        [sys.executable, str(MODULE), str(tmp_path / "args.json")],
        capture_output=True,
        text=True,
        env=env,
        cwd=str(tmp_path),
        check=False,
        timeout=60,
    )
    assert proc.stdout.strip(), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def test_module_end_to_end_success(tmp_path):
    rc, out = run_module(
        tmp_path,
        {
            "nvidia_smi": str(FAKE),
            "expected_gpu_count": 8,
            "expected_gpu_name": "H100",
            "min_driver_version": "535.216.01",
            "require_nvlink": True,
            "_ansible_check_mode": True,
        },
        SMI / "h100-sxm5-nvswitch-8gpu",
    )
    assert rc == 0, out
    assert out.get("failed") is not True
    assert out["changed"] is False
    assert out["gpu_count"] == 8
    assert out["driver_version"] == "550.127.05"
    assert out["gpus"][7] == {
        "index": 7,
        "name": "NVIDIA H100 80GB HBM3",
        "uuid": "GPU-8ce9db56-7a3a-fe66-9785-5add385b1bff",
        "memory_total_mib": 81559,
        "pci_bus_id": "00000000:DB:00.0",
        "mig_enabled": False,
    }
    assert out["topology"][3] == ["NV18"] * 3 + ["X"] + ["NV18"] * 4
    assert out["nvlink_full_mesh"] is True
    assert out["numa_affinity"] == ["0"] * 4 + ["1"] * 4
    assert (tmp_path / "calls.log").read_text().splitlines() == [
        "--query-gpu=index,name,uuid,memory.total,pci.bus_id,driver_version,mig.mode.current "
        "--format=csv,noheader,nounits",
        "topo -m",
    ]


def test_module_end_to_end_expectations_fail(tmp_path):
    rc, out = run_module(
        tmp_path,
        {"nvidia_smi": str(FAKE), "expected_gpu_count": 8, "require_nvlink": True, "min_driver_version": "580.95.05"},
        SMI / "l40s-pcie-4gpu",
    )
    assert rc == 1
    assert out["failed"] is True
    assert out["msg"].startswith("GPU expectations not met: expected 8 GPUs, found 4; ")
    assert "expected driver version >= 580.95.05, found 570.86.15" in out["msg"]
    assert "GPU0-GPU1 PIX" in out["msg"]
    assert out["gpu_count"] == 4 and out["nvlink_full_mesh"] is False  # facts still returned


def test_module_end_to_end_single_gpu_null_numa(tmp_path):
    rc, out = run_module(tmp_path, {"nvidia_smi": str(FAKE)}, SMI / "l4-single-gpu")
    assert rc == 0, out
    assert out["numa_affinity"] == [None]
    assert out["nvlink_full_mesh"] is False


def test_module_end_to_end_driver_broken(tmp_path):
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "fail").write_text(
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
        "Make sure that the latest NVIDIA driver is installed and running.\n"
    )
    rc, out = run_module(tmp_path, {"nvidia_smi": str(FAKE)}, broken)
    assert rc == 1 and out["failed"] is True
    assert "failed with rc 9: the NVIDIA driver is missing or broken" in out["msg"]
    assert "couldn't communicate with the NVIDIA driver" in out["msg"]


def test_module_end_to_end_nvidia_smi_missing(tmp_path):
    rc, out = run_module(tmp_path, {"nvidia_smi": "nvidia-smi-does-not-exist-here"})
    assert rc == 1 and out["failed"] is True
    assert "cannot run nvidia-smi-does-not-exist-here" in out["msg"]
    assert "the NVIDIA driver is missing or not installed" in out["msg"]


def test_module_rejects_bad_min_driver_version(tmp_path):
    rc, out = run_module(tmp_path, {"nvidia_smi": str(FAKE), "min_driver_version": "latest"})
    assert rc == 1
    assert out["msg"] == "min_driver_version: 'latest' is not a dotted numeric version such as 550.127.05"


# ---------------------------------------------------------------- fleet checks


def with_driver(facts, driver):
    return {**facts, "driver_version": driver}


def test_uniform_fleet_has_no_problems():
    h100 = facts_of("h100-sxm5-nvswitch-8gpu")
    reports = {"head": h100, "w1": h100, "w2": h100}
    assert gt.fleet_problems(reports, tensor_parallel_size=8, require_nvlink=True) == []


def test_fleet_with_a_missing_gpu_names_the_odd_host_and_each_variant():
    h100 = facts_of("h100-sxm5-nvswitch-8gpu")
    seven = {**h100, "gpus": h100["gpus"][:7], "gpu_count": 7, "topology": [r[:7] for r in h100["topology"][:7]]}
    (problem,) = gt.fleet_problems({"head": h100, "w1": h100, "w2": seven})
    assert "not uniform" in problem
    assert "8 x NVIDIA H100 80GB HBM3, driver %s on head, w1" % h100["driver_version"] in problem
    assert "7 x NVIDIA H100 80GB HBM3, driver %s on w2" % h100["driver_version"] in problem


def test_fleet_with_another_driver_lists_hosts_per_driver():
    h100 = facts_of("h100-sxm5-nvswitch-8gpu")
    (problem,) = gt.fleet_problems({"a": h100, "b": with_driver(h100, "535.216.01"), "c": h100})
    assert "driver 535.216.01 on b" in problem
    assert "driver %s on a, c" % h100["driver_version"] in problem


def test_fleet_with_other_gpu_model_is_not_uniform():
    problems = gt.fleet_problems({"a": facts_of("a100-sxm4-8gpu"), "b": facts_of("h100-sxm5-nvswitch-8gpu")})
    assert len(problems) == 1 and "A100" in problems[0] and "H100" in problems[0]


def test_tensor_parallel_larger_than_a_node_names_host_and_alternative():
    l40s = facts_of("l40s-pcie-4gpu")
    problem, second = gt.fleet_problems({"gpu-1": l40s, "gpu-2": l40s}, tensor_parallel_size=8)
    assert second.startswith("gpu-2 has 4 GPUs")
    assert problem.startswith("gpu-1 has 4 GPUs but tensor parallel size 8")
    assert "at most 4" in problem and "pipeline parallel" in problem
    assert gt.fleet_problems({"gpu-1": l40s}, tensor_parallel_size=8, allow_cross_node_tp=True) == []


def test_nvlink_tp_groups_on_pcie_host_fail_only_when_required():
    l40s = facts_of("l40s-pcie-4gpu")
    assert gt.fleet_problems({"gpu-1": l40s}, tensor_parallel_size=2) == []
    (problem,) = gt.fleet_problems({"gpu-1": l40s}, tensor_parallel_size=2, require_nvlink=True)
    assert problem.startswith("gpu-1: tensor parallel groups of 2")
    assert "GPUs 0,1" in problem and "GPUs 2,3" in problem


def test_nvlink_down_breaks_only_the_groups_that_contain_the_gpu():
    down = facts_of("h100-sxm5-nvswitch-8gpu-gpu5-nvlink-down")
    (problem,) = gt.fleet_problems({"n": down}, tensor_parallel_size=4, require_nvlink=True)
    assert "GPUs 4,5,6,7" in problem and "GPUs 0,1,2,3" not in problem
    (problem,) = gt.fleet_problems({"n": down}, tensor_parallel_size=8, require_nvlink=True)
    assert "GPUs 0,1,2,3,4,5,6,7" in problem


def test_tensor_parallel_zero_skips_size_checks_and_negative_is_rejected():
    l4 = facts_of("l4-single-gpu")
    assert gt.fleet_problems({"a": l4}, tensor_parallel_size=0, require_nvlink=True) == []
    with pytest.raises(ValueError):
        gt.fleet_problems({"a": l4}, tensor_parallel_size=-1)


@pytest.mark.parametrize(
    "system, expected",
    [
        ("h100-sxm5-nvswitch-8gpu", True),
        ("a100-sxm4-8gpu", True),
        ("h100-sxm5-nvswitch-8gpu-gpu5-nvlink-down", False),
        ("l40s-pcie-4gpu", False),
        ("l4-single-gpu", False),
    ],
)
def test_needs_fabric_manager(system, expected):
    assert gt.needs_fabric_manager(facts_of(system)) is expected
