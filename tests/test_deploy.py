"""The deploy recipes (deploy/README.md) checked offline, without a cluster: the compose
file against the Compose Specification's schema (vendored by check-jsonschema), every
Kubernetes manifest against the API's schemas in strict mode (kubernetes-validate ships
them), and the systemd units by ``systemd-analyze verify`` where systemd is installed.
Each check is also shown a broken copy, so a validator that accepts anything fails here.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
KUBERNETES_VERSION = "1.37"
UNIT_SCEMON = "/opt/scemon/.venv/bin/scemon"


def check_compose(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.compose-spec", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_compose_file_follows_the_compose_specification(tmp_path: Path) -> None:
    done = check_compose(DEPLOY / "compose.yaml")
    assert done.returncode == 0, done.stdout + done.stderr
    broken = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    broken["services"]["shard-0"]["restart_policy"] = "always"  # not a service key
    (tmp_path / "compose.yaml").write_text(yaml.safe_dump(broken))
    refused = check_compose(tmp_path / "compose.yaml")
    assert refused.returncode == 1 and "restart_policy" in refused.stdout + refused.stderr


def manifests() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in sorted((DEPLOY / "k8s").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                out.append((f"{path.name}:{doc['kind']}/{doc['metadata']['name']}", doc))
    return out


@pytest.mark.parametrize("doc", [d for _, d in manifests()], ids=[n for n, _ in manifests()])
def test_kubernetes_manifest_is_valid(doc: dict[str, Any]) -> None:
    import kubernetes_validate  # type: ignore[import-untyped]

    kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)


def test_the_kubernetes_check_refuses_a_broken_manifest() -> None:
    import kubernetes_validate  # type: ignore[import-untyped]

    [doc] = [d for _, d in manifests() if d["kind"] == "StatefulSet"]
    doc["spec"]["replicas"] = "two"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
    [doc] = [d for _, d in manifests() if d["kind"] == "StatefulSet"]
    doc["spec"]["replica"] = 2  # unknown field: strict mode refuses it
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)


def verify_units(folder: Path, units: list[Path]) -> str:
    """``systemd-analyze verify`` of the units: its complaints ('' when none)."""
    done = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", *map(str, units)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=folder,
    )
    complaints = (done.stdout + done.stderr).strip()
    return complaints or ("" if done.returncode == 0 else f"exit status {done.returncode}")


def units_in(folder: Path, scemon: Path) -> list[Path]:
    """The units as installed: the template as an instance (a template cannot be
    verified), and the scemon they run pointed at an executable that exists here."""
    out = []
    for unit, name in (("scemon@.service", "scemon@8081.service"), ("scemon-stream.service", None)):
        text = (DEPLOY / "systemd" / unit).read_text().replace(UNIT_SCEMON, str(scemon))
        target = folder / (name or unit)
        target.write_text(text)
        out.append(target)
    return out


@pytest.mark.skipif(
    shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed (no systemd here)"
)
def test_systemd_units_verify(tmp_path: Path) -> None:
    scemon = tmp_path / "scemon"
    scemon.write_text("#!/bin/sh\nexit 0\n")
    scemon.chmod(0o755)
    assert UNIT_SCEMON in (DEPLOY / "systemd" / "scemon@.service").read_text()
    units = units_in(tmp_path, scemon)
    assert verify_units(tmp_path, units) == ""
    broken = units[0]
    broken.write_text(broken.read_text().replace("RestartSec=2", "RestartSecs=2"))
    assert "RestartSecs" in verify_units(tmp_path, units)
