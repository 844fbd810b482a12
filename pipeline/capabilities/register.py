"""register: give a verified publication of this run its registration number (``pipeline.publishing.numbers``).

Registering the same publication again returns its existing number.
"""

from __future__ import annotations

from typing import Annotated, Any

from pipeline.errors import CapabilityError
from pipeline.states import PublicationStatus
from pipeline.tools.claims import Lexicon
from pipeline.tools.toolbox import RunContext, capability

LEXICON = Lexicon(
    verbs=(
        "已登记",
        "已写入台账",
        "已入账",
        "已(将|把).{0,16}(登记|写入台账|入账)",
        r"\bregistered\b",
        r"\b(logged|recorded|entered|added|written|filed|created|made)\b[^.]{0,40}\b(ledger|registry)\b",
        r"\b(ledger|registry)\b[^.]{0,30}\b(logged|recorded|entered|added|created|made)\b",
        r"\bbooked\b[^.]{0,30}\b(ledger|registry)\b",
        r"\b(put|placed|is|are) (it |them )?on record\b",
        r"\b(ledger|registry)\b[^.]{0,20}\b(has|holds|contains|shows) (an |the |a )?(entry|record)\b",
    ),
    zh_step="登记|入账|入册|台账|编号(已经?)?分配|备案|备了案",
    en_step=r"\bregist\w*|\bledger\b",
)


@capability(order=50, fact="registration_no", lexicon=LEXICON)
def register(ctx: RunContext, publication_id: Annotated[int, "The publication_id returned by publish."]) -> dict[str, Any]:
    """Register a verified publication in the ledger. Returns its registration_no."""
    from pipeline.ledger.models import Publication
    from pipeline.publishing.numbers import assign, registration_day

    day = registration_day(ctx.settings.registration)
    with ctx.ledger.write() as s:
        pub = s.get(Publication, publication_id)
        if pub is None or pub.run_id != ctx.run_id:
            raise CapabilityError(f"no publication {publication_id} in this run; pass the publication_id returned by publish")
        if pub.status != PublicationStatus.VERIFIED:
            raise CapabilityError(f"publication {publication_id} is {pub.status}, not verified; only verified publications are registered")
        reg = assign(s, ctx.settings.registration, pub, day)
        url = pub.url
    return {"registration_no": reg.registration_no, "publication_id": publication_id, "url": url}
