"""``--channel NAME`` of the reading and quarantine commands (contract 13): one channel's
deliveries, every channel's without it. An unknown name is refused in one line, exit 2
(``on_channels.channel_ids``' OperatorError through ``_guard``)."""

from __future__ import annotations

from typing import Annotated

import typer

from exchange.i18n import N_

ChannelOpt = Annotated[
    str | None,
    typer.Option(
        "--channel",
        help=N_("One channel's deliveries (its name; default: every channel)."),
    ),
]
