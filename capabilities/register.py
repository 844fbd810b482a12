"""register: give a verified publication of this run its registration number.

Numbers are ``<prefix>-YYYYMMDD-NNN`` with the date in ``[register] timezone``.
The number is assigned inside one ``BEGIN IMMEDIATE`` transaction, so two
processes can never take the same one; registering the same publication
again returns its existing number.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Annotated
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from sqlalchemy import func
from sqlmodel import select

from pipeline.errors import CapabilityError, ConfigError
from pipeline.models import Publication, Registration
from pipeline.tools import RunContext, capability

if TYPE_CHECKING:
    from sqlmodel import Session

    from pipeline.config import Config


def registration_day(cfg: Config) -> str:
    try:
        tz = ZoneInfo(cfg.registration.timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise ConfigError(f"[register] timezone: unknown time zone {cfg.registration.timezone!r}") from None
    return datetime.now(tz).strftime("%Y%m%d")


def assign(session: Session, cfg: Config, pub: Publication, day: str) -> Registration:
    """The publication's registration, made now in this (write) transaction if it has none."""
    reg = session.exec(select(Registration).where(Registration.publication_id == pub.id)).first()
    if reg is None:
        seq = (session.exec(select(func.max(Registration.seq)).where(Registration.day == day)).one() or 0) + 1
        reg = Registration(run_id=pub.run_id, publication_id=pub.id, day=day, seq=seq,
                           registration_no=f"{cfg.registration.prefix}-{day}-{seq:03d}")
        session.add(reg)
        session.flush()
    return reg


@capability
def register(ctx: RunContext, publication_id: Annotated[int, "The publication_id returned by publish."]) -> dict:
    """Register a verified publication in the ledger. Returns its registration_no."""
    day = registration_day(ctx.cfg)
    with ctx.ledger.write() as s:
        pub = s.get(Publication, publication_id)
        if pub is None or pub.run_id != ctx.run_id:
            raise CapabilityError(f"no publication {publication_id} in this run; pass the publication_id returned by publish")
        if pub.status != "verified":
            raise CapabilityError(f"publication {publication_id} is {pub.status}, not verified; only verified publications are registered")
        reg = assign(s, ctx.cfg, pub, day)
        url = pub.url
    return {"registration_no": reg.registration_no, "publication_id": publication_id, "url": url}
