"""The secret helpers every output uses (issue 12 item 4): ``Settings.secrets()`` names the
values, ``secret_forms`` spells each as it may be quoted on its way out, ``mask_secrets`` hides
them. The logs (exchange.logs), the reports (exchange.report.mask), the site client, the
database errors and the command line all go through these.

Low on purpose (the import contracts say so): the targets, the database and the logs mask
secrets without importing the configuration.
"""

from __future__ import annotations

import functools
import html
import json
import re
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import parse_qsl, quote, quote_plus, urlsplit

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from exchange.errors import ConfigurationError

SECRET_MASK = "***"
# Names of URL query parameters that carry a secret (libpq's password and sslpassword, and the
# usual spellings of others): masked wherever a URL is shown.
_SECRET_QUERY_KEY = re.compile(r"pass|pwd|secret|token|api_?key", re.IGNORECASE)
BOM = "\ufeff"


def secret_forms(secret: str) -> list[str]:
    """Every spelling under which ``secret`` may appear in a text, longest first: as is, as a
    Python str or bytes repr shows it, JSON-escaped (ASCII-only or not), percent-encoded (either
    hex case, with "+" for a space or not), HTML-escaped, and JSON-escaped twice (a repr inside
    a JSON string). Masking all of them masks the secret in any quoting."""
    if not secret:
        return []
    once = {
        secret,
        repr(secret)[1:-1],
        secret.encode("unicode_escape").decode("ascii"),
        repr(secret.encode("utf-8"))[2:-1],
        json.dumps(secret)[1:-1],
        json.dumps(secret, ensure_ascii=False)[1:-1],
        html.escape(secret),
        html.escape(secret, quote=False),
    }
    for encoded in (quote(secret, safe=""), quote_plus(secret, safe=""), quote(secret)):
        once |= {encoded, re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), encoded)}
    # Python's repr escapes a quote only when both kinds are present: both spellings.
    once |= {form.replace("'", "\\'") for form in list(once)}
    forms = set(once)
    for form in once:
        forms.add(json.dumps(form)[1:-1])
    return sorted(forms, key=lambda f: (-len(f), f))


def mask_secrets(text: str, forms: Iterable[str]) -> str:
    """``text`` with every form (from ``secret_forms``, longest first) replaced by ``***``,
    except where that would cut a word: a form is not masked where a word character (a letter,
    a digit or ``_``) on its edge meets one beside it. Inside a longer word the same letters
    are another word ("t" in "rejected", "exchange" in "1c_exchange.php"): replacing them
    there damages the text and hides nothing."""
    pattern = _secret_pattern(tuple(form for form in forms if form))
    return text if pattern is None else pattern.sub(SECRET_MASK, text)


@functools.lru_cache(maxsize=64)
def _secret_pattern(forms: tuple[str, ...]) -> re.Pattern[str] | None:
    if not forms:
        return None
    # Longest first: a secret that contains another is replaced whole.
    ordered = sorted(set(forms), key=lambda f: (-len(f), f))
    return re.compile("|".join(_alone(form) for form in ordered))


def _alone(form: str) -> str:
    """``form`` as a pattern that does not match inside a word."""
    before = r"(?<!\w)" if re.match(r"\w", form) else ""
    after = r"(?!\w)" if re.match(r"\w", form[-1]) else ""
    return before + re.escape(form) + after


# The shortest run of a key's characters masked where a text quotes the key only in part (a
# JWT's signature alone, its first 40 characters, the key run on into the next word): 12
# characters of a key carry 60 bits or more of it, and no word says them by chance.
PIECE = 12


def mask_pieces(text: str, secret: str, least: int = PIECE) -> str:
    """``text`` with every run of at least ``least`` characters of ``secret`` (a piece of it,
    wherever it stands, whatever letters touch it) replaced by ``***``: a part quoted (each
    part of a JWT is one) shows nothing of the key. A ``secret`` shorter than ``least`` is
    masked whole only (``mask_secrets``)."""
    found = _pieces(secret, least)
    if found is None:
        return text
    runs, grams = found
    out: list[str] = []
    done = 0
    for run in runs.finditer(text):
        start, end = run.span()
        covered = [False] * (end - start)
        for i in range(start, end - least + 1):
            if text[i : i + least] in grams:
                covered[i - start : i - start + least] = [True] * least
        i = 0
        while i < len(covered):
            if not covered[i]:
                i += 1
                continue
            j = i
            while j < len(covered) and covered[j]:
                j += 1
            out += [text[done : start + i], SECRET_MASK]
            done = start + j
            i = j
    return text if not out else "".join(out) + text[done:]


@functools.lru_cache(maxsize=16)
def _pieces(secret: str, least: int) -> tuple[re.Pattern[str], frozenset[str]] | None:
    """The runs of ``secret``'s own characters at least ``least`` long (where a piece may
    stand: found at C speed, a long body costs little), and its pieces of ``least``."""
    if len(secret) < least:
        return None
    alphabet = "".join(re.escape(c) for c in sorted(set(secret)))
    grams = frozenset(secret[i : i + least] for i in range(len(secret) - least + 1))
    return re.compile(f"[{alphabet}]{{{least},}}"), grams


def url_secrets(url: str | None) -> list[str]:
    """The secrets a database URL carries: the password of its userinfo and the values of its
    secret query parameters (``?password=…``, ``sslpassword=…``)."""
    if not url:
        return []
    try:
        parsed = make_url(url)
    except ArgumentError:
        return []
    found = [str(parsed.password)] if parsed.password else []
    for key, value in parsed.query.items():
        if _SECRET_QUERY_KEY.search(key):
            found += [value] if isinstance(value, str) else list(value)
    return [secret for secret in found if secret]


def clean_token(raw: str, source: str = "") -> str | None:
    """The token as it goes into the Authorization header, or ValueError with one line that
    never holds the token.

    Surrounding whitespace (a trailing CR/LF of a file or an env file written on Windows, a
    space pasted along) and a byte order mark (a file saved by Notepad) are stripped: they are
    never part of a token, and that is what a person who wrote the file means. What remains
    must be visible ASCII: a control character, a space or a non-ASCII character inside it
    cannot travel in an HTTP header, and is refused here instead of failing every request."""
    token = raw.strip().strip(BOM).strip()
    if not token:
        return None
    where = f"{source}: " if source else ""
    if token[:7].lower() == "bearer ":
        raise ValueError(f"{where}write the token alone, without 'Bearer ' (the service adds it)")
    for position, char in enumerate(token, start=1):
        if "!" <= char <= "~":
            continue
        what = (
            "a space"
            if char == " "
            else "a control character"
            if char < " " or char == "\x7f"
            else "a non-ASCII character"
        )
        raise ValueError(
            f"{where}character {position} of {len(token)} of the token is {what}; a token "
            "goes into an HTTP header and may hold only visible ASCII characters: copy it "
            "again from the site"
        )
    return token


def read_secret_file(path: Path, source: str) -> str:
    """A secret file's text, or ConfigurationError when it cannot be read."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigurationError(f"{source} cannot be read: {exc.strerror}") from None
    return secret_file_text(data, source)


def secret_file_text(data: bytes, source: str) -> str:
    """A secret file's bytes as text: UTF-8, a byte order mark (Notepad's) dropped, or UTF-16
    with its byte order mark (Notepad's "Unicode"); ValueError naming ``source`` otherwise
    (never the content)."""
    try:
        if data.startswith((b"\xff\xfe", b"\xfe\xff")):
            return data.decode("utf-16")
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ValueError(f"{source}: the file is not UTF-8 text (save it as UTF-8)") from None


# A shop's exchange address may carry a key of its own in the query: wc1c's receiver address is
# ``get_site_url(null, '/?wc1c-receiver=<id>&lazysign=<md5>&get_param')`` (wc1c/wc1c-main
# src/Schemas/Productscml/Admin.php, configurationsFieldsReceiver), and its Receiver refuses
# every mode but checkauth without that ``lazysign`` (handlerCheckauthKey): a credential.
_SECRET_HTTP_QUERY_KEY = re.compile(r"pass|pwd|secret|token|api_?key|sign", re.IGNORECASE)


def http_url_secrets(url: str | None) -> list[str]:
    """The secrets a shop's URL carries: the password of its userinfo and the values of its
    secret query parameters (``lazysign=…``, ``token=…``)."""
    if not url:
        return []
    try:
        parts = urlsplit(url)
        found = [parts.password] if parts.password else []
    except ValueError:
        return []
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if value and _SECRET_HTTP_QUERY_KEY.search(name):
            found.append(value)
    return [secret for secret in found if secret]


def safe_http_url(url: str) -> str:
    """A shop's URL fit for a line a person reads: its secrets (``http_url_secrets``) masked,
    the rest as typed."""
    return mask_secrets(
        url, [form for found in http_url_secrets(url) for form in secret_forms(found)]
    )


def safe_url(url: str) -> str:
    """A database URL fit for a log or an error message: the password masked, in the userinfo
    and in the query (``?password=…``, ``sslpassword=…``)."""
    try:
        parsed: URL = make_url(url)
    except ArgumentError:
        return "<invalid URL>"
    secret_keys = [key for key in parsed.query if _SECRET_QUERY_KEY.search(key)]
    if not secret_keys:
        return parsed.render_as_string(hide_password=True)
    marker = "EXCHANGEMASKEDVALUE"
    query = {**parsed.query, **dict.fromkeys(secret_keys, marker)}
    shown = parsed.set(query=query).render_as_string(hide_password=True)
    return shown.replace(marker, SECRET_MASK)
