"""Searches a YaCy peer through searx's YaCy engine, used unchanged.

searx loads an engine by executing its module file (searx.engines.load_engine
with imp.load_source); this does the same with the yacy.py of the installed
searx package, sets the engine's base_url as searx's settings.yml would, and
runs its request() and response() as searx's search does for one page.

Usage: python searx_yacy.py BASE_URL QUERY PAGENO [CATEGORY]

Prints one JSON object: {"url": the URL the engine asked for, "results":
[{"url", "title", "content", "publishedDate" (ISO 8601)}...]}. HTTP errors
and parse errors end the program with a traceback and a non-zero exit.
"""

import importlib.util
import json
import os
import sys
import urllib.request

import searx


def load_engine():
    path = os.path.join(os.path.dirname(searx.__file__), "engines", "yacy.py")
    spec = importlib.util.spec_from_file_location("yacy", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Response:
    """The part of a requests.Response that engines read."""

    def __init__(self, url, status, text):
        self.url = url
        self.status_code = status
        self.text = text


def main():
    base_url, query, pageno = sys.argv[1], sys.argv[2], int(sys.argv[3])
    category = sys.argv[4] if len(sys.argv) > 4 else "general"
    engine = load_engine()
    engine.base_url = base_url
    params = {"pageno": pageno, "category": category, "language": "all",
              "url": "", "headers": {}, "method": "GET"}
    params = engine.request(query, params)
    with urllib.request.urlopen(params["url"], timeout=30) as r:
        resp = Response(params["url"], r.status, r.read().decode("utf-8"))
    out = []
    for res in engine.response(resp):
        res = dict(res)
        if res.get("publishedDate") is not None:
            res["publishedDate"] = res["publishedDate"].isoformat()
        out.append(res)
    json.dump({"url": params["url"], "results": out}, sys.stdout)


if __name__ == "__main__":
    main()
