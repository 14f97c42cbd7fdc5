import os
import sys
import tempfile
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
for path in (str(ROOT), str(ROOT / "cli")):
    if path not in sys.path:
        sys.path.insert(0, path)

os.environ.setdefault("YOLO_OFFLINE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# the suite never reads the developer's own caches (a `graphprof calibrate` made with another thread count
# would make `--measure` refuse its stale file): a fresh cache folder per run, as CI's clean machine has
_CACHE = tempfile.TemporaryDirectory(prefix="graphprof-tests-cache-")  # removed when the run ends
os.environ["XDG_CACHE_HOME"] = _CACHE.name


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture(autouse=True)
def _own_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test its own empty cache folder: a `graphprof calibrate` (or `--measure` learning) in one test
    never reaches another's ``local.json``. A test that sets ``XDG_CACHE_HOME`` itself (``monkeypatch.setenv``)
    overrides this one; module-scoped fixtures, made before it, see the run's folder above."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache")))
