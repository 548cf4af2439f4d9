"""A local stand-in for the Hugging Face hub's upload API, for tests: a real HTTP server on loopback that
answers the calls `HfApi.create_repo` and `HfApi.upload_folder` make (create the repo, check a model card's
metadata, ask each file's upload mode, commit), telling the client to send every file inline, and keeps what
was committed in memory.
`huggingface_hub` itself talks to it (point `HF_ENDPOINT` or `huggingface_hub.constants.ENDPOINT` at `url`), so
a push is tested through the real client without a network or an account."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import yaml

_PREUPLOAD = re.compile(r"^/api/models/(?P<repo>[^/]+/[^/]+)/preupload/(?P<revision>[^/?]+)")
_COMMIT = re.compile(r"^/api/models/(?P<repo>[^/]+/[^/]+)/commit/(?P<revision>[^/?]+)")


class HubStandIn:
    """Repos created (`repos`: id -> private) and files committed (`files`: repo id -> path -> bytes)."""

    def __init__(self) -> None:
        self.repos: dict[str, bool] = {}
        self.files: dict[str, dict[str, bytes]] = {}
        self.commits: list[str] = []
        self.cards_checked = 0
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_args) -> None:  # quiet test output
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                status, answer = stand_in.answer(self.path, body)
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def answer(self, path: str, body: bytes) -> tuple[int, dict]:
        """The status and JSON answer to one POST."""
        if path.startswith("/api/repos/create"):
            request = json.loads(body)
            repo = f"{request['organization']}/{request['name']}" if request.get("organization") else request["name"]
            self.repos[repo] = bool(request.get("private")) or request.get("visibility") == "private"
            self.files.setdefault(repo, {})
            return 200, {"url": f"{self.url}/{repo}", "name": repo}
        if path.startswith("/api/validate-yaml"):
            return self._validate_card(json.loads(body)["content"])
        if match := _PREUPLOAD.match(path):
            if match["repo"] not in self.repos:
                return 404, {"error": "Repository not found"}
            files = json.loads(body)["files"]
            return 200, {"files": [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False} for f in files]}
        if match := _COMMIT.match(path):
            repo = match["repo"]
            if repo not in self.repos:
                return 404, {"error": "Repository not found"}
            for line in body.splitlines():
                item = json.loads(line)
                if item["key"] == "file":
                    self.files[repo][item["value"]["path"]] = base64.b64decode(item["value"]["content"])
                elif item["key"] != "header":
                    return 400, {"error": f"the stand-in takes inline files only, not {item['key']}"}
            oid = hashlib.sha1(body).hexdigest()
            self.commits.append(oid)
            return 200, {"commitUrl": f"{self.url}/{repo}/commit/{oid}", "commitOid": oid, "success": True}
        return 404, {"error": f"the stand-in does not answer {path}"}

    def _validate_card(self, content: str) -> tuple[int, dict]:
        """The hub's check of a README's metadata: YAML front matter that is a mapping."""
        parts = content.split("---\n", 2)
        if not content.startswith("---\n") or len(parts) < 3:
            return 400, {"error": "no YAML front matter"}
        try:
            metadata = yaml.safe_load(parts[1])
        except yaml.YAMLError as error:
            return 400, {"error": f"invalid YAML: {error}"}
        if not isinstance(metadata, dict):
            return 400, {"error": "the front matter is not a mapping"}
        self.cards_checked += 1
        return 200, {"errors": [], "warnings": []}

    def __enter__(self) -> HubStandIn:
        self.thread.start()
        return self

    def __exit__(self, *_exc) -> None:
        self.server.shutdown()
        self.server.server_close()
