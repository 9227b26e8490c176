"""A marketplace's upload task in flight for one good (contract 14: Wildberries answers an
upload with a task whose outcome is read later): what the target keeps of it between attempts
and across restarts (``targets/wildberries/store.py``, ``db/wb_store.py``)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

# How long a Wildberries task not shown yet counts as pending (research §8), and how long
# after that the good of a possibly-applied upload (its answer lost, or 5xx/422) stays held
# until WB shows whether it applied it: the target's defaults (``WildberriesTarget``), and the
# bound the backlog's estimate says for such a good (``ops.backlog``): up to an hour.
TASK_TIMEOUT = 1800.0
HOLD = TASK_TIMEOUT + TASK_TIMEOUT


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
