"""Scrapy peer of scripts/bench -peers.

Crawls start URLs under the same politeness as gridcrawl's benchmark:
robots.txt obeyed, one request at a time per host, a fixed delay without
jitter, no AutoThrottle, the same depth. Stores every response body in one
append-only file and a parsed title and links per HTML page as JSON lines,
and prints a summary line of JSON when the crawl ends. Run it through run.sh,
which provides the venv.

Every host name resolves to 127.0.0.1 (the simulated web's URLs carry its
port), as gridcrawl's GRIDCRAWL_RESOLVE and Colly's dialer do.
"""

import argparse
import json
import os
import sys
import time
from urllib.parse import urldefrag, urlsplit

import scrapy
from scrapy.crawler import CrawlerProcess
from scrapy.http import TextResponse
from twisted.internet import defer
from twisted.internet.interfaces import IResolverSimple
from zope.interface import implementer


@implementer(IResolverSimple)
class LoopbackResolver:
    """Resolves every host name to 127.0.0.1."""

    def __init__(self, reactor):
        self.reactor = reactor

    @classmethod
    def from_crawler(cls, crawler, reactor):
        return cls(reactor)

    def install_on_reactor(self):
        self.reactor.installResolver(self)

    def getHostByName(self, name, timeout=()):
        return defer.succeed("127.0.0.1")


class PeerSpider(scrapy.Spider):
    name = "peer"

    def __init__(self, starts, out, **kw):
        super().__init__(**kw)
        self.starts = starts
        self.allowed_domains = sorted({urlsplit(u).hostname for u in starts})
        self.bodies = open(os.path.join(out, "bodies.dat"), "wb")
        self.pages = open(os.path.join(out, "pages.jsonl"), "w", encoding="utf-8")
        self.responses = 0
        self.nbytes = 0

    async def start(self):
        for u in self.starts:
            yield scrapy.Request(u, callback=self.parse)

    def parse(self, response):
        self.responses += 1
        self.nbytes += len(response.body)
        self.bodies.write(f"{response.url} {response.status} {len(response.body)}\n".encode())
        self.bodies.write(response.body)
        if not isinstance(response, TextResponse) or b"html" not in response.headers.get(b"Content-Type", b""):
            return
        links = []
        for ref in response.css("a::attr(href), frame::attr(src), iframe::attr(src)").getall():
            u = urldefrag(response.urljoin(ref.strip()))[0]
            if u.startswith(("http://", "https://")):
                links.append(u)
        title = (response.css("title::text").get() or "").strip()
        self.pages.write(json.dumps({"url": response.url, "status": response.status, "title": title, "links": links}) + "\n")
        for u in links:
            yield scrapy.Request(u, callback=self.parse)

    def closed(self, reason):
        self.bodies.close()
        self.pages.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--urls", required=True, help="file of start URLs, one a line")
    ap.add_argument("--delay-ms", type=int, default=100, help="milliseconds between requests to one host")
    ap.add_argument("--depth", type=int, default=4, help="link depth from the start URLs")
    ap.add_argument("--out", default="scrapy-out", help="output directory")
    a = ap.parse_args()
    with open(a.urls, encoding="utf-8") as f:
        starts = [l.strip() for l in f if l.strip()]
    os.makedirs(a.out, exist_ok=True)
    hosts = len({urlsplit(u).netloc for u in starts})
    settings = {
        "ROBOTSTXT_OBEY": True,
        "USER_AGENT": "scrapy-peer",
        "DOWNLOAD_DELAY": a.delay_ms / 1000,
        # Jitter off: DOWNLOAD_DELAY_JITTER replaces RANDOMIZE_DOWNLOAD_DELAY
        # (deprecated since Scrapy 2.17).
        "DOWNLOAD_DELAY_JITTER": 0,
        "CONCURRENT_REQUESTS_PER_DOMAIN": 1,
        # Enough slots for every host at once, so the per-host limit binds.
        "CONCURRENT_REQUESTS": max(16, hosts),
        "AUTOTHROTTLE_ENABLED": False,
        "DEPTH_LIMIT": a.depth,
        "TWISTED_DNS_RESOLVER": "crawl.LoopbackResolver",
        "DOWNLOAD_TIMEOUT": 60,
        "TELNETCONSOLE_ENABLED": False,
        "LOG_LEVEL": "WARNING",
    }
    proc = CrawlerProcess(settings)
    crawler = proc.create_crawler(PeerSpider)
    t0 = time.monotonic()
    proc.crawl(crawler, starts=starts, out=a.out)
    proc.start()
    spider = crawler.spider
    stats = crawler.stats.get_stats()
    json.dump({"crawler": "scrapy", "responses": spider.responses, "bytes": spider.nbytes,
               "errors": stats.get("downloader/exception_count", 0),
               "robots_forbidden": stats.get("robotstxt/forbidden", 0),
               "wall_s": time.monotonic() - t0}, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    main()
