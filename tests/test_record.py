"""``Record``: a result's JSON form is its fields, in order, nested records written out too."""

from __future__ import annotations

import json
from dataclasses import dataclass, fields

from graphprof.base.record import Record
from graphprof.devices.links import Link
from graphprof.scaling.fit import GrowthFit


@dataclass(frozen=True)
class _Inner(Record):
    a: int
    b: tuple[float, ...]


@dataclass(frozen=True)
class _Outer(Record):
    name: str
    inner: _Inner


def test_a_record_writes_its_fields_in_order_and_its_nested_records() -> None:
    outer = _Outer("x", _Inner(3, (0.5, 1.5)))
    assert outer.to_dict() == {"name": "x", "inner": {"a": 3, "b": (0.5, 1.5)}}
    assert list(outer.to_dict()) == [f.name for f in fields(_Outer)]
    assert json.loads(json.dumps(outer.to_dict())) == {"name": "x", "inner": {"a": 3, "b": [0.5, 1.5]}}


def test_results_that_inherit_it_keep_their_keys() -> None:
    # the keys these results wrote field by field before they inherited Record
    assert Link("nvlink", 450.0, "NVLink 4", "H100 datasheet").to_dict() == {
        "kind": "nvlink", "gbs": 450.0, "label": "NVLink 4", "source": "H100 datasheet"
    }  # fmt: skip
    fit = GrowthFit(metric="flops", coefficient=2.0, exponent=1.0, r2=0.99)
    assert fit.to_dict() == {f.name: getattr(fit, f.name) for f in fields(GrowthFit)}
    assert set(fit.to_dict()) == {"metric", "exponent", "coefficient", "r2"}
