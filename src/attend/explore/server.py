"""serve(cfg): the decoding explorer on a local web server (explore.py; 127.0.0.1 only): a reviewer types a sentence
or picks an image or audio file and gets its explorer page, decoded as predict.py decodes (``explore_batch``).

Built on Werkzeug (Pallets' WSGI toolkit, already installed with TensorBoard): its development server, request
parsing and multipart uploads are all this needs; one model, one reviewer, no framework around it."""

from __future__ import annotations

import html
import logging
import re
import tempfile
from pathlib import Path

from omegaconf import DictConfig
from werkzeug.serving import make_server
from werkzeug.wrappers import Request, Response

from attend.checkpoints.saved_run import load_run, restore
from attend.config.errors import ConfigError
from attend.data.audio import AudioReadError
from attend.data.images import ImageReadError
from attend.explore import explore_batch, explorer_page

log = logging.getLogger(__name__)

HOST = "127.0.0.1"  # never another interface: the page runs a model on whatever it is sent
FORM = """<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>Attend explorer</title>
<style>body{{font:14px system-ui,sans-serif;margin:24px}} input[type=text]{{width:40em}} .error{{color:#c62828}}</style>
</head><body><h1>Attend explorer</h1><p>{checkpoint}</p><p class="error" id="error">{error}</p>
<form method="post" action="/explore" enctype="multipart/form-data">
<p>{field}</p><p><label>reference (optional, teacher-forced): <input type="text" name="reference"></label></p>
<p><button type="submit">explore</button></p></form></body></html>"""
FIELDS = {
    "text": '<label>sentence: <input type="text" name="text" autofocus></label>',
    "image": '<label>image: <input type="file" name="file" accept="image/*"></label>',
    "audio": '<label>audio file (WAV, FLAC, OGG): <input type="file" name="file" accept="audio/*"></label>',
}


class InputError(ValueError):
    """A typed input or uploaded file that cannot be explored; the message says what to send instead."""


class Explorer:
    """A checkpoint's model, and a page for one input at a time."""

    def __init__(self, cfg: DictConfig) -> None:
        self.run = load_run(cfg.ckpt_path, cfg)
        self.datamodule, self.model = restore(self.run)
        self.kind = self.datamodule.modality  # "text", "image" or "audio": what the form asks for

    def page(self, text: str | None = None, upload: tuple[str, bytes] | None = None, reference: str = "") -> str:
        """The explorer page of a sentence (text sources) or of an uploaded file's name and bytes."""
        with tempfile.TemporaryDirectory() as folder:
            source = self.source(text, upload, Path(folder))
            try:
                batch = self.datamodule.batch_from_sources([source])
            except (ImageReadError, AudioReadError) as error:
                # the reader's own cause when it has one, and the name the reviewer sent, not the temporary copy's
                why = str(error.__cause__ or error).replace(source, (upload or ("",))[0] or "the file")
                raise InputError(f"cannot read the file: {why}; pick another {self.kind} file") from error
            _, pages = explore_batch(self.model, self.datamodule, batch, self.model.test_search,
                                     [reference.strip() or None], ["typed input"])
        if upload is not None:
            pages[0]["input"] = upload[0]
        return explorer_page(pages[0])

    def source(self, text: str | None, upload: tuple[str, bytes] | None, folder: Path) -> str:
        """The sentence, or the upload saved under ``folder`` (its name's suffix kept: readers go by it)."""
        if self.kind == "text":
            if not (text or "").strip():
                raise InputError("the sentence is empty: type a sentence to translate")
            return text.strip()
        if upload is None or not upload[1]:
            raise InputError(f"no file was sent: pick an {self.kind} file")
        suffix = re.sub(r"[^A-Za-z0-9.]", "", Path(upload[0]).suffix)[:8]
        path = folder / f"input{suffix}"
        path.write_bytes(upload[1])
        return str(path)


def application(explorer: Explorer):
    """The WSGI application: GET / the form, POST /explore the page (an input error: the form again, saying why)."""

    def form(error: str = "", status: int = 200) -> Response:
        text = FORM.format(checkpoint=html.escape(str(explorer.run.path)), error=html.escape(error),
                           field=FIELDS[explorer.kind])
        return Response(text, status=status, mimetype="text/html")

    @Request.application
    def app(request: Request) -> Response:
        if request.path == "/" and request.method == "GET":
            return form()
        if request.path != "/explore" or request.method != "POST":
            return Response("not found: open / for the form", status=404)
        upload = request.files.get("file")
        try:
            page = explorer.page(
                text=request.form.get("text"),
                upload=(upload.filename or "", upload.read()) if upload else None,
                reference=request.form.get("reference", ""),
            )
        except InputError as error:
            return form(str(error), status=400)
        return Response(page, mimetype="text/html")

    return app


def explorer_server(cfg: DictConfig):
    """The server (not yet serving) for ``cfg`` (explore.yaml); a port in use is a ConfigError naming the fix."""
    port = cfg.get("port")
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise ConfigError(f"port={port!r}: give a TCP port number, e.g. port=8765 (0: any free port)")
    explorer = Explorer(cfg)
    try:
        return make_server(HOST, port, application(explorer), threaded=False)
    except (OSError, SystemExit) as error:  # Werkzeug exits on a port in use
        raise ConfigError(f"port {port} on {HOST} is in use: pass another, e.g. port={port + 1} (or port=0 for any "
                          f"free port), or stop what listens there") from error


def serve(cfg: DictConfig) -> None:
    server = explorer_server(cfg)
    print(f"Attend explorer: http://{HOST}:{server.server_port}/  (Ctrl-C stops it)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
