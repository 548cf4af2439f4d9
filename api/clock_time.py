"""`HH:MM` on the command line as the next such moment: when a session's work must stop (`seedcast eval` and
`seedcast compare --sample-until`, the bench's `--stop-by`)."""

from __future__ import annotations

import argparse
from datetime import datetime, timedelta

LONGEST_AHEAD = timedelta(hours=12)  # a session lasts hours: a time further off is likely a typo


def next_clock_time(text: str, option: str = "--sample-until", now: datetime | None = None) -> float:
    """The next `HH:MM` (local time) as a timestamp: today's, or tomorrow's once today's has passed, so a session
    that crosses midnight can stop after it. A time more than 12 hours away is refused as a likely typo, which also
    catches a time that passed a moment ago. Errors name `option` and are argparse's, for use as an argument type."""
    now = now or datetime.now()
    try:
        hours, minutes = (int(part) for part in text.split(":"))
        moment = now.replace(hour=hours, minute=minutes, second=0, microsecond=0)
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"{option} takes HH:MM (local time), got {text!r}") from error
    if moment <= now:
        moment += timedelta(days=1)
    if moment - now > LONGEST_AHEAD:
        raise argparse.ArgumentTypeError(
            f"{option} {text} is {(moment - now) / timedelta(hours=1):.1f} h away (or has just passed); "
            "give a time within the next 12 hours"
        )
    return moment.timestamp()


def sample_until_argument(text: str) -> float:
    """argparse type of `--sample-until HH:MM`."""
    return next_clock_time(text, "--sample-until")
