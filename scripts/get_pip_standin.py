"""Stand-in for pip's get-pip.py, for ansible-test's sanity venvs (scripts/sanity.sh installs it).

ansible-test bootstraps pip in each venv it creates with a get-pip script it downloads from a host this
network cannot reach; it first looks for a cached copy (~/.ansible/test/cache/get_pip_<version>.py) and
runs it with the new venv's python and arguments such as
`--disable-pip-version-check pip==24.2 --no-setuptools --no-wheel`.

This one bootstraps pip from the standard library (ensurepip), then installs the pip asked for with it.
The package index is reached through a TLS-inspecting proxy whose CA is in the system bundle, which the
pip of those venvs does not read (it trusts its vendored certifi bundle): the system bundle is appended to
that bundle after each install. Where there is no such proxy, the appended CAs are ones the system
trusts already.
"""

import ensurepip
import os
import subprocess
import sys

SYSTEM_CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"


def trust_system_cas():
    """Append the system CA bundle to the venv pip's certifi bundle, once."""
    if not os.path.exists(SYSTEM_CA_BUNDLE):
        return
    where = subprocess.run(
        [sys.executable, "-c", "import pip._vendor.certifi as c; print(c.where())"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    with open(SYSTEM_CA_BUNDLE, "rb") as handle:
        system = handle.read()
    with open(where, "rb") as handle:
        vendored = handle.read()
    if system not in vendored:
        with open(where, "ab") as handle:
            handle.write(b"\n" + system)


def main():
    """Bootstrap pip in sys.executable's venv, as get-pip.py would with the same arguments."""
    args = sys.argv[1:]
    ensurepip.bootstrap(upgrade=True)
    trust_system_cas()
    packages = [arg for arg in args if arg not in ("--no-setuptools", "--no-wheel")]
    subprocess.run([sys.executable, "-m", "pip", "install", "--upgrade", *packages], check=True)
    # Python 3.11's ensurepip also installs setuptools, which get-pip.py leaves out when asked to.
    if "--no-setuptools" in args:
        subprocess.run([sys.executable, "-m", "pip", "uninstall", "--yes", "--quiet", "setuptools"], check=True)
    trust_system_cas()


if __name__ == "__main__":
    main()
