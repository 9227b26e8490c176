"""A marketplace's upload task in flight for one good (contract 14: Wildberries answers an
upload with a task whose outcome is read later): what the target keeps of it between attempts
and across restarts (``targets/wildberries/store.py``, ``db/wb_store.py``)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal


@dataclass(frozen=True, slots=True)
class Task:
    """One ``nmID`` of an upload task in flight."""

    nm_id: int
    # 0: stored before the upload went, WB has named no task for it (yet); below 0: an upload
    # WB answered with that status negated (5xx, 422), which may have made a task all the same
    upload_id: int
    price: Decimal  # the whole roubles uploaded
    message_id: str  # the delivery that carried it
    uploaded_at: datetime
    # How many goods the upload carried (a processed task may list fewer); 0 when a 208 named
    # another upload's task: what it carried is read from its lines.
    goods: int
