"""Issue 16: one true sentence on replacing the site token, the same everywhere it is said
(the configuration page docs/settings.md, the deployment guide; the Russian runbook says the
same in Russian)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SENTENCE = (
    "Replacing the token: write the new one into the token file; a running service keeps using "
    "the old token until the site refuses it, then reads the file again and resumes by itself (a "
    "scheduled task reads it at its next run), and only a token set in `EXCHANGE_SITE_TOKEN` "
    "itself needs a restart."
)


def _flat(path: str) -> str:
    return " ".join((ROOT / path).read_text("utf-8").split())


def test_the_token_sentence_is_the_same_everywhere() -> None:
    for path in ("docs/settings.md", "docs/deployment.md"):
        assert SENTENCE in _flat(path), path
    runbook = _flat("docs/runbook.ru.md")
    assert "пользуется старым, пока сайт его не отвергнет, затем перечитывает файл" in runbook
    assert "after replacing it, restart the service" not in _flat("docs/deployment.md")
