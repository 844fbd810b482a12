"""Registration numbers: ``<prefix>-YYYYMMDD-NNN``, the date in ``[register] timezone``.

A number is assigned inside the caller's write transaction (``BEGIN IMMEDIATE``), so two
processes can never take the same one; a publication keeps the number it was given.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from sqlalchemy import func
from sqlmodel import Session, select

from ..errors import ConfigError
from ..ledger.models import Publication, Registration

if TYPE_CHECKING:
    from ..config import RegisterConfig


def registration_day(register: RegisterConfig) -> str:
    """Today in ``[register] timezone``, as a number's date part (``YYYYMMDD``)."""
    try:
        tz = ZoneInfo(register.timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise ConfigError(f"[register] timezone: unknown time zone {register.timezone!r}") from None
    return datetime.now(tz).strftime("%Y%m%d")


def assign(session: Session, register: RegisterConfig, pub: Publication, day: str) -> Registration:
    """The publication's registration, made now in this (write) transaction if it has none."""
    reg = session.exec(select(Registration).where(Registration.publication_id == pub.id)).first()
    if reg is None:
        seq: Any = (session.exec(select(func.max(Registration.seq)).where(Registration.day == day)).one() or 0) + 1
        reg = Registration(run_id=pub.run_id, publication_id=pub.id, day=day, seq=seq,
                           registration_no=f"{register.prefix}-{day}-{seq:03d}")
        session.add(reg)
        session.flush()
    return reg
