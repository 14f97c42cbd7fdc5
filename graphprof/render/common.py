"""What every renderer of a profile shares: the roofline it reads (never computes)."""

from __future__ import annotations

from graphprof.cost.bounds import Roofline
from graphprof.cost.result import Profile
from graphprof.errors import InvalidInputError

__all__ = ["profile_roofline"]


def profile_roofline(profile: Profile) -> Roofline:
    """The classification ``profile`` carries (:attr:`Profile.roofline`, set by :func:`graphprof.profile_model`
    and :func:`graphprof.cost.roofline.with_roofline`). Renderers read it; none classifies or predicts again."""
    if profile.roofline is None:
        raise InvalidInputError(
            f"the profile of {profile.model_name} carries no roofline: make it with graphprof.profile_model, "
            "or classify it once with graphprof.cost.roofline.with_roofline(profile, hardware)"
        )
    return profile.roofline
