"""Real graphs from PyG datasets: ``karate`` (packaged with PyG), others only from a local folder.

>>> data = load_graph("karate")          # doctest: +SKIP
>>> data.num_nodes, data.num_edges       # doctest: +SKIP
(34, 156)

graphprof never downloads. A dataset other than KarateClub is read from ``root`` (the ``--data-root``
option of the command line) where a copy of it already is; without one, :func:`load_graph` raises a
one-line :class:`~graphprof.errors.DownloadUnavailableError` naming the option. Loading runs inside
:func:`graphprof.models.offline.network_blocked`, so a dataset class that tries to fetch files fails at
once instead of hanging.

PyG reads a folder's ``processed/*.pt`` files with ``torch.load(weights_only=True)`` and, where that
fails, again with ``weights_only=False``, which runs whatever a crafted file names. So every such file is
first loaded with torch's restricted unpickler alone (:func:`graphprof.models.trust.restricted_load_refusal`);
one it refuses is refused (:class:`~graphprof.errors.UnsafeLoadError`) unless ``allow_unsafe_load=True``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from graphprof.errors import DownloadUnavailableError, InvalidInputError, UnsafeLoadError
from graphprof.models.offline import find_blocked_download, network_blocked
from graphprof.models.pyg_import import import_pyg
from graphprof.models.trust import ALLOW_HINT, restricted_load_refusal

__all__ = ["DATASETS", "load_graph", "DATA_ROOT_OPTION"]

DATA_ROOT_OPTION = "--data-root"

#: name -> (PyG dataset class, its keyword arguments); ``karate`` needs no files.
DATASETS: Mapping[str, tuple[str, Mapping[str, Any]]] = MappingProxyType(
    {
        "karate": ("KarateClub", MappingProxyType({})),
        "peptides_func": ("LRGBDataset", MappingProxyType({"name": "Peptides-func"})),
        "peptides_struct": ("LRGBDataset", MappingProxyType({"name": "Peptides-struct"})),
        "zinc": ("ZINC", MappingProxyType({"subset": True})),
        "cora": ("Planetoid", MappingProxyType({"name": "Cora"})),
        "citeseer": ("Planetoid", MappingProxyType({"name": "CiteSeer"})),
        "pubmed": ("Planetoid", MappingProxyType({"name": "PubMed"})),
    }
)


def _key(name: str) -> str:
    key = name.strip().lower().replace("-", "_")
    return "karate" if key in ("karateclub", "karate_club") else key


def check_processed(root: Path, name: str) -> None:
    """Refuse a processed file under ``root`` that PyG could load only by running code from it."""
    for path in sorted(root.rglob("*.pt")):
        if path.is_file() and path.parent.name == "processed":
            refusal = restricted_load_refusal(path)
            if refusal:
                raise UnsafeLoadError(f"dataset {name}: {path} would run code as PyG loads it ({refusal}); {ALLOW_HINT}")


def load_graph(name: str, root: str | Path | None = None, index: int = 0, *, allow_unsafe_load: bool = False) -> Any:
    """Graph ``index`` of dataset ``name`` as a PyG ``Data`` (see the module docstring)."""
    key = _key(name)
    if key not in DATASETS:
        raise InvalidInputError(f"unknown graph dataset {name!r}; known: {', '.join(DATASETS)}")
    cls_name, kwargs = DATASETS[key]
    import_pyg()
    import torch_geometric.datasets as pyg_datasets

    cls = getattr(pyg_datasets, cls_name)
    if key == "karate":
        return cls()[index]
    if root is None or not Path(root).expanduser().is_dir():
        where = "no folder given" if root is None else f"{root} is not a folder"
        raise DownloadUnavailableError(
            f"dataset {name} needs a download and graphprof never downloads ({where}); point {DATA_ROOT_OPTION} at a folder holding a copy"
        )
    if not allow_unsafe_load:
        check_processed(Path(root).expanduser(), name)
    try:
        with network_blocked():
            dataset = cls(root=str(Path(root).expanduser()), **dict(kwargs))
    except Exception as exc:
        blocked = find_blocked_download(exc)
        if blocked is None:
            raise
        raise DownloadUnavailableError(
            f"dataset {name} is not complete in {root} and graphprof never downloads; point {DATA_ROOT_OPTION} at a folder holding a copy"
        ) from exc
    return dataset[index]
