"""register: give a verified publication of this run its registration number.

Numbers are ``<prefix>-YYYYMMDD-NNN`` with the date in ``[register] timezone``.
The number is assigned inside one ``BEGIN IMMEDIATE`` transaction, so two
processes can never take the same one; registering the same publication
again returns its existing number.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from sqlalchemy import func
from sqlmodel import select

from pipeline.errors import CapabilityError, ConfigError
from pipeline.models import Publication, Registration
from pipeline.tools import RunContext, capability


@capability
def register(ctx: RunContext, publication_id: Annotated[int, "The publication_id returned by publish."]) -> dict:
    """Register a verified publication in the ledger. Returns its registration_no."""
    try:
        tz = ZoneInfo(ctx.cfg.registration.timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise ConfigError(f"[register] timezone: unknown time zone {ctx.cfg.registration.timezone!r}") from None
    day = datetime.now(tz).strftime("%Y%m%d")
    with ctx.ledger.write() as s:
        pub = s.get(Publication, publication_id)
        if pub is None or pub.run_id != ctx.run_id:
            raise CapabilityError(f"no publication {publication_id} in this run; pass the publication_id returned by publish")
        if pub.status != "verified":
            raise CapabilityError(f"publication {publication_id} is {pub.status}, not verified; only verified publications are registered")
        reg = s.exec(select(Registration).where(Registration.publication_id == pub.id)).first()
        if reg is None:
            seq = (s.exec(select(func.max(Registration.seq)).where(Registration.day == day)).one() or 0) + 1
            reg = Registration(run_id=ctx.run_id, publication_id=pub.id, day=day, seq=seq,
                               registration_no=f"{ctx.cfg.registration.prefix}-{day}-{seq:03d}")
            s.add(reg)
        url = pub.url
    return {"registration_no": reg.registration_no, "publication_id": publication_id, "url": url}
