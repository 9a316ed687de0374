"""The explorer's local server (explore.py): the form, a typed sentence answered with its page (the page
predict.py's explorer writes for it), input errors as the form again with one line, and start-up errors as
ConfigErrors naming the fix."""

from __future__ import annotations

import io
import json
import re
import socket
import subprocess
import sys

import pytest
from werkzeug.test import Client

from attend.config.compose import compose_config
from attend.config.errors import ConfigError
from attend.explore import explore_batch
from attend.explore.server import HOST, Explorer, application, explorer_server
from tests.helpers.paths import DATES, ROOT

SHAPES = DATES.parent / "shapes.ckpt"


def page_data(text: str) -> dict:
    return json.loads(re.search(r'type="application/json">(.*?)</script>', text, re.S).group(1))


def explorer(checkpoint=DATES, *overrides) -> Explorer:
    return Explorer(compose_config([f"ckpt_path={checkpoint}", *overrides], "explore"))


@pytest.fixture(scope="module")
def dates() -> Explorer:
    return explorer()


def test_a_typed_sentence_gets_the_page_of_predict_search(dates):
    client = Client(application(dates))
    form = client.get("/")
    assert form.status_code == 200 and 'name="text"' in form.get_data(as_text=True)
    answer = client.post("/explore", data={"text": " march 3 1999 ", "reference": "1999-03-03"})
    assert answer.status_code == 200 and answer.mimetype == "text/html"
    data = page_data(answer.get_data(as_text=True))
    batch = dates.datamodule.batch_from_sources(["march 3 1999"])
    _, pages = explore_batch(dates.model, dates.datamodule, batch, dates.model.test_search, ["1999-03-03"])
    assert data["modes"] == pages[0]["modes"] and data["output"] == pages[0]["output"]


def test_an_empty_sentence_is_the_form_again_saying_why(dates):
    answer = Client(application(dates)).post("/explore", data={"text": "   "})
    error = re.search(r'id="error">(.*?)</p>', answer.get_data(as_text=True)).group(1)
    assert answer.status_code == 400 and error == "the sentence is empty: type a sentence to translate"


def test_an_unreadable_image_is_the_form_again_saying_why():
    client = Client(application(explorer(SHAPES)))
    assert 'type="file"' in client.get("/").get_data(as_text=True)
    answer = client.post("/explore", data={"file": (io.BytesIO(b"not an image"), "photo.jpg")})
    error = re.search(r'id="error">(.*?)</p>', answer.get_data(as_text=True)).group(1)
    assert answer.status_code == 400 and error.startswith("cannot read the file:") and "pick another image" in error
    missing = client.post("/explore", data={})
    assert missing.status_code == 400 and "no file was sent" in missing.get_data(as_text=True)


def test_a_port_in_use_names_the_fix():
    with socket.socket() as taken:
        taken.bind((HOST, 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ConfigError, match=f"port {port} on 127.0.0.1 is in use: pass another"):
            explorer_server(compose_config([f"ckpt_path={DATES}", f"port={port}"], "explore"))


def test_the_server_listens_on_the_loopback_only():
    server = explorer_server(compose_config([f"ckpt_path={DATES}", "port=0"], "explore"))
    try:
        assert server.server_address[0] == "127.0.0.1" and server.server_port > 0
    finally:
        server.server_close()


def test_explore_py_reports_a_missing_checkpoint_in_one_line(tmp_path):
    result = subprocess.run([sys.executable, "explore.py", f"ckpt_path={tmp_path / 'none.ckpt'}"], cwd=ROOT,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert lines[-1].startswith("Error: ConfigError: checkpoint") and "pass ckpt_path=" in lines[-1]
