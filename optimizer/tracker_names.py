"""`report_to` as users write it (`none`, `tensorboard`, `tensorboard,wandb`, a YAML list) → tracker names."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator

from seedcast.proto.choices import one_of

# Tracker name -> what to install for it: the one list of trackers (trackers.py implements each).
TRACKERS: dict[str, str] = {
    "tensorboard": "pip install 'seedcast[tensorboard]'",
    "wandb": "pip install 'seedcast[wandb]'",
}


def tracker_names(value: Any) -> Any:
    """A comma-separated string or a list, with `none` meaning no tracker; anything else passes to pydantic,
    which names what is allowed."""
    if value is None:
        return []
    if isinstance(value, str):
        value = [part.strip() for part in value.split(",") if part.strip()]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return [v for v in value if v.lower() != "none"]
    return value


# The config field's type: tracker names, parsed from what users write.
ReportTo = Annotated[list[Annotated[str, one_of(TRACKERS, "tracker")]], BeforeValidator(tracker_names)]
