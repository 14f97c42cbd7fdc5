"""The links between GPUs, per preset, and what a collective over them costs (NCCL's own cost model).

Each preset that has published interconnect figures carries a :class:`Links` record (the data is in
:mod:`graphprof.devices.hardware`, beside the rest of each device's figures): the link inside a
node (NVLink / NVSwitch, AMD's Infinity Fabric "xGMI", or PCIe where a card has nothing else) and the
network between nodes, **per GPU and per direction** in GB/s (10**9 bytes per second), with the document
each figure comes from. Vendors print NVLink as the bidirectional total ("900 GB/s"); one direction is
half of it, and a ring collective sends in one direction while it receives in the other.

A collective's time follows NCCL's tuning model (``src/graph/tuning.cc``, the *Simple* protocol that
large transfers use), restated here from its figures, not its code:

* ring all-gather / reduce-scatter over ``N`` ranks moving ``S`` bytes (the gathered tensor, or the full
  input of the reduction): ``N - 1`` steps, ``t = base + steps x hop + (N - 1) / N x S / bus``;
* ring all-reduce: ``2 (N - 1)`` steps, ``t = base + steps x hop + 2 (N - 1) / N x S / bus``;
* tree all-reduce (across nodes): ``t = 2 ((N / nodes - 1) x tree_hop_intra + log2(nodes) x tree_hop_net)
  + 2 S / min(0.9 bus, cap)``, ``cap`` 80 GB/s beyond two nodes and 110 GB/s within two; the faster of
  ring and tree is taken, as NCCL does;
* ``base`` = 8.4 us per call, a ring hop 3.4 us over NVLink, 5.7 us over PCIe and 9.6 us across the
  network (inter-node steps ``nodes - 1``, twice for an all-reduce); a tree hop 28 us inside a node, 50 us
  across (NCCL 2.x, ``baseLat`` / ``hwLat`` of ``tuning.cc``, Simple protocol);
* ``bus`` is the link's per-direction bandwidth: the intra-node one when the group stays in one node;
  across nodes, the NICs of the group's GPUs in a node together (``k`` GPUs of the group in each node, each
  with its own NIC as on DGX / HGX systems: NCCL runs one ring channel per NIC, and a node-by-node ring
  crosses each node boundary once per channel, so ``k`` channels carry the ring's data between nodes at
  ``k x`` the per-GPU rate), never above the intra-node one. No efficiency below the datasheet is applied:
  nothing here is fitted.

Worked example: an all-gather of 436 MB over 8 H100s in one node: ``(7/8) x 436e6 / 450e9 = 0.848 ms``
plus ``8.4 + 7 x 3.4 = 32.2 us``: 0.880 ms.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import MappingProxyType

from graphprof.base.record import Record
from graphprof.errors import InvalidInputError

__all__ = ["Link", "Links", "Group", "CollectiveKind", "collective_seconds", "group_layout"]

#: NCCL's per-call base latency and per-hop latencies, seconds (tuning.cc, Simple protocol).
BASE_LATENCY_S = 8.4e-6
RING_HOP_S = MappingProxyType({"nvlink": 3.4e-6, "xgmi": 3.4e-6, "pcie": 5.7e-6, "network": 9.6e-6})
TREE_HOP_S = MappingProxyType({"intra": 28e-6, "network": 50e-6})
#: NCCL's caps on a tree's bus bandwidth (GB/s): beyond two nodes, and within two.
TREE_CAP_GBS = (80.0, 110.0)

CollectiveKind = str  # "all_gather", "reduce_scatter", "all_reduce"
_KINDS = ("all_gather", "reduce_scatter", "all_reduce")


@dataclass(frozen=True)
class Link(Record):
    """One kind of link: its technology (``nvlink``, ``xgmi``, ``pcie``, ``network``), its per-GPU,
    per-direction bandwidth in GB/s, and the document that gives it."""

    kind: str
    gbs: float
    label: str
    source: str


@dataclass(frozen=True)
class Links:
    """A preset's links: inside a node and (``None`` where no system figure is published) between nodes."""

    intra: Link
    inter: Link | None = None

    def to_dict(self) -> dict[str, object]:
        return {"intra": self.intra.to_dict(), "inter": None if self.inter is None else self.inter.to_dict()}


@dataclass(frozen=True)
class Group:
    """A communicator: ``ranks`` GPUs over ``nodes`` nodes (``ranks / nodes`` in each)."""

    ranks: int
    nodes: int

    @property
    def per_node(self) -> int:
        return max(1, self.ranks // self.nodes)


def group_layout(fsdp: int, tp: int, gpus_per_node: int) -> tuple[Group, Group]:
    """The FSDP (``dp``) and tensor-parallel groups of a ``dp x tp`` mesh whose ranks fill nodes of
    ``gpus_per_node`` in order (``init_device_mesh``'s layout: ``tp`` the inner, contiguous dimension).

    >>> group_layout(64, 8, 8)   # TP inside each node; each FSDP group one GPU on each of 64 nodes
    (Group(ranks=64, nodes=64), Group(ranks=8, nodes=1))
    >>> group_layout(16, 1, 8)
    (Group(ranks=16, nodes=2), Group(ranks=1, nodes=1))
    """
    if gpus_per_node < 1:
        raise InvalidInputError(f"--gpus-per-node must be at least 1, got {gpus_per_node}")
    tp_nodes = math.ceil(tp / gpus_per_node)
    dp_per_node = max(1, gpus_per_node // tp)
    dp_nodes = fsdp if tp >= gpus_per_node else math.ceil(fsdp / dp_per_node)
    return Group(fsdp, dp_nodes), Group(tp, tp_nodes)


def _bus_gbs(links: Links, group: Group, preset: str) -> tuple[float, str]:
    """Per-direction bandwidth a ring over ``group`` sees, and the hop kind of its steps: across nodes, the
    NICs of the group's GPUs in one node together (``min(intra, per_node x inter)``)."""
    if group.nodes <= 1:
        return links.intra.gbs, links.intra.kind
    if links.inter is None:
        raise InvalidInputError(
            f"{preset}: no published network figure between nodes; keep the group inside one node (--gpus-per-node) "
            "or use a preset whose system datasheet gives one (a100, h100, h200, b200)"
        )
    return min(links.intra.gbs, group.per_node * links.inter.gbs), links.intra.kind


def _ring_seconds(kind: CollectiveKind, nbytes: float, group: Group, bus_gbs: float, hop: str) -> float:
    twice = 2 if kind == "all_reduce" else 1
    steps = twice * (group.ranks - 1)
    net_steps = twice * (group.nodes - 1)
    latency = BASE_LATENCY_S + (steps - net_steps) * RING_HOP_S[hop] + net_steps * RING_HOP_S["network"]
    return latency + twice * (group.ranks - 1) / group.ranks * nbytes / (bus_gbs * 1e9)


def _tree_seconds(nbytes: float, group: Group, bus_gbs: float) -> float:
    cap = TREE_CAP_GBS[0] if group.nodes > 2 else TREE_CAP_GBS[1]
    latency = 2 * ((group.per_node - 1) * TREE_HOP_S["intra"] + math.log2(group.nodes) * TREE_HOP_S["network"])
    return latency + 2 * nbytes / (min(0.9 * bus_gbs, cap) * 1e9)


def collective_seconds(kind: CollectiveKind, nbytes: float, group: Group, links: Links, preset: str = "device") -> float:
    """Seconds of one collective of ``kind`` moving ``nbytes`` (see the module docstring); 0 over one rank."""
    if kind not in _KINDS:
        raise InvalidInputError(f"unknown collective {kind!r} (one of {', '.join(_KINDS)})")
    if group.ranks <= 1 or nbytes <= 0:
        return 0.0
    bus, hop = _bus_gbs(links, group, preset)
    ring = _ring_seconds(kind, nbytes, group, bus, hop)
    if kind == "all_reduce" and group.nodes > 1:
        return min(ring, _tree_seconds(nbytes, group, bus))
    return ring
