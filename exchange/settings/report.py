"""The operators' scheduled report: where, when, in what formats and language, what is masked."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, field_validator


class ReportSettings(BaseModel):
    """EXCHANGE_REPORT_*."""

    report_dir: Path | None = Field(
        None,
        description="Directory where run writes the operators' report on a schedule; unset: "
        "no scheduled report.",
    )
    report_cron: str = Field(
        "0 * * * *",
        description="When run writes the report: a crontab line (minute hour day month "
        "day-of-week), in UTC.",
    )
    report_formats: list[Literal["csv", "xlsx", "html", "json"]] = Field(
        ["html", "csv"],
        min_length=1,
        description="Formats of the scheduled report.",
    )
    report_keep: int = Field(
        10,
        ge=1,
        le=100_000,
        description="Timestamped scheduled reports kept per format; older ones are deleted.",
    )
    report_lang: Literal["ru", "en"] = Field(
        "ru",
        description="Language of the report's labels; also the default of quarantine export "
        "--lang.",
    )
    report_mask_fields: list[str] = Field(
        default_factory=list,
        description="Payload fields shown as *** in reports, at any depth (case-insensitive); "
        "each name at most 200 printable characters.",
    )

    @field_validator("report_cron")
    @classmethod
    def _report_cron(cls, value: str) -> str:
        # Checked here, so that a bad line stops `exchange run` at start, not at the first export.
        from apscheduler.triggers.cron import CronTrigger

        try:
            CronTrigger.from_crontab(value, timezone="UTC")
        except ValueError as exc:
            raise ValueError(
                f"{value!r} is not a crontab line (minute hour day month day-of-week, "
                f"e.g. '0 * * * *'): {exc}"
            ) from None
        return value

    @field_validator("report_formats", "report_mask_fields")
    @classmethod
    def _distinct(cls, value: list[str]) -> list[str]:
        return list(dict.fromkeys(item.strip() for item in value if item.strip()))

    @field_validator("report_mask_fields")
    @classmethod
    def _mask_fields(cls, value: list[str]) -> list[str]:
        for name in value:
            if len(name) > 200 or not name.isprintable():
                raise ValueError(
                    f"field names are at most 200 printable characters ({name[:20]!r}…)"
                )
        return value
