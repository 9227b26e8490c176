"""The shop API of contract 5 as a ``Target``: single requests, or the batch API (5b) when
``EXCHANGE_SITE_BATCH_SIZE`` > 1, falling back to single requests for good when the site has
no batch endpoint (it answers 404 to one)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence

from exchange.domain.verdicts import Classification
from exchange.targets.base import OutgoingMessage, Release, Shown
from exchange.targets.shop_api import batch
from exchange.targets.shop_api.answers import classify, released, shown
from exchange.targets.shop_api.client import BATCH_PATH, SiteClient

log = logging.getLogger(__name__)


class ShopApiTarget:
    name = "api"

    def __init__(
        self, client: SiteClient, *, batch_size: int, token: Callable[[], str | None]
    ) -> None:
        """``token`` reads the site token (again, on ``reload_credentials``)."""
        self.client = client
        self.batch_size = batch_size
        self._token = token
        self._held: str | None = None  # the token read last (``reload_credentials``)
        self.batch_endpoint_missing = False  # the site answered 404 to a batch: singles only

    @property
    def batching(self) -> bool:
        return self.batch_size > 1 and not self.batch_endpoint_missing

    def requests(self, messages: Sequence[OutgoingMessage]) -> list[list[OutgoingMessage]]:
        if self.batching:
            return batch.chunks(messages, self.batch_size)
        return [[message] for message in messages]

    async def send(self, messages: Sequence[OutgoingMessage]) -> list[Classification]:
        if not self.batching:
            if len(messages) == 1:  # the usual case: no task of its own
                return [await self._single(messages[0])]
            return list(await asyncio.gather(*(self._single(m) for m in messages)))
        result = await self.client.send_batch(messages)
        if batch.endpoint_missing(result):
            if not self.batch_endpoint_missing:
                self.batch_endpoint_missing = True
                log.warning(
                    "the site answered 404 to %s: it has no batch endpoint; "
                    "sending single requests from now on",
                    BATCH_PATH,
                )
            # No attempt is charged for the 404: the messages go as single requests now.
            return list(await asyncio.gather(*(self._single(m) for m in messages)))
        answers = batch.split(result, [m.message_id for m in messages])
        return [classify(answers[m.message_id], m.version) for m in messages]

    async def _single(self, message: OutgoingMessage) -> Classification:
        return classify(await self.client.send(message), message.version)

    async def health(self) -> Classification:
        # The health answer has no version to compare: any 2xx reads as DELIVERED.
        return classify(await self.client.health(), 0)

    async def withheld_shown(self, messages: Sequence[OutgoingMessage]) -> list[Shown]:
        """``WithholdsPrices``: asked of the site simulator's test device only (answers.py)."""
        results = await asyncio.gather(*(self.client.withheld(m.message_id) for m in messages))
        return [shown(result) for result in results]

    async def release_withheld(self, messages: Sequence[OutgoingMessage]) -> list[Release]:
        results = await asyncio.gather(
            *(self.client.withheld(m.message_id, release=True) for m in messages)
        )
        return [released(result) for result in results]

    def reload_credentials(self) -> bool:
        token = self._token()
        self.client.set_token(token)
        before, self._held = self._held, token
        return token != before

    async def aclose(self) -> None:
        await self.client.aclose()
