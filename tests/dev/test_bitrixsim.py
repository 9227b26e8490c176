"""The 1C-Bitrix simulator behaves as ``catalog.import.1c``'s component.php says (issue 22 item
12), in the respects the target leans on: the file names it writes, the security checks in its
order (a user who signs in but may not import), checkauth's own refusals, the answers in
windows-1251."""

from __future__ import annotations

import httpx
import pytest

from exchange.dev.bitrixsim import MESSAGES, BitrixSimulator, safe_name


@pytest.mark.parametrize(
    ("given", "written"),
    [
        ("offers.xml", "offers.xml"),
        ("/tmp/offers.xml", "offers.xml"),  # 1C on Linux: "This check for 1c server on linux"
        ("upload/1c/webdataoffers.xml", "offers.xml"),
        ("import_files\\ab\\photo.jpg", "import_files/ab/photo.jpg"),  # a folder below is fine
        ("../offers.xml", None),  # rel2abs leaves the folder
        ("import_files/../../x.xml", None),
        ("shell.php", None),  # HasScriptExtension
        ("", None),
    ],
)
def test_file_names_as_component_php_writes_them(given: str, written: str | None) -> None:
    assert written == safe_name(given)


def exchange(site: BitrixSimulator, mode: str, cookie: str = "", sessid: str = "") -> str:
    query = f"?type=catalog&mode={mode}" + (f"&sessid={sessid}" if sessid else "")
    answer = httpx.get(
        site.receiver_url + query,
        auth=("exchange", "secret") if mode == "checkauth" else None,
        headers={"Cookie": cookie} if cookie else None,
    )
    assert "charset=windows-1251" in answer.headers["content-type"]
    return answer.content.decode("windows-1251")


def test_a_user_without_the_right_to_import_signs_in_and_is_refused_after() -> None:
    """component.php: checkauth answers any signed-in user; every later mode checks the source,
    the authorization, then $bUSER_HAVE_ACCESS (admin or GROUP_PERMISSIONS):
    CC_BSC1_PERMISSION_DENIED."""
    with BitrixSimulator("exchange", "secret") as site:
        assert isinstance(site, BitrixSimulator)
        site.faults.no_permission = True
        signed_in = exchange(site, "checkauth").splitlines()
        assert "success" == signed_in[0]
        cookie, sessid = f"{signed_in[1]}={signed_in[2]}", signed_in[3].removeprefix("sessid=")
        assert f"failure\n{MESSAGES['CC_BSC1_PERMISSION_DENIED']}" == exchange(
            site, "init", cookie, sessid
        )


@pytest.mark.parametrize(
    "key", ["CC_BSC1_ERROR_SESSION_ID_CHANGE", "CC_BSC1_ERROR_DATABASE_SERVER_TIME"]
)
def test_checkauth_refuses_a_signed_in_user_for_the_sites_setup(key: str) -> None:
    """component.php's checkauth branch: session id rotation on, or the database's clock more
    than 10 minutes off the web server's."""
    with BitrixSimulator("exchange", "secret") as site:
        assert isinstance(site, BitrixSimulator)
        site.faults.checkauth_failure = key
        assert f"failure\n{MESSAGES[key]}" == exchange(site, "checkauth")
