import json, sys
from warcio.archiveiterator import ArchiveIterator as WarcioIter
from fastwarc.warc import ArchiveIterator as FastIter

def warcio_records(path):
    out = []
    with open(path, 'rb') as f:
        it = WarcioIter(f, check_digests=True, no_record_parse=True)
        for rec in it:
            block = rec.raw_stream.read()
            h = rec.rec_headers
            out.append({"type": h.get_header('WARC-Type'), "uri": h.get_header('WARC-Target-URI') or "",
                "id": h.get_header('WARC-Record-ID'), "length": int(h.get_header('Content-Length')),
                "refers_to": h.get_header('WARC-Refers-To') or "", "block": block.decode('utf-8', 'replace'),
                "offset": it.get_record_offset(), "member_length": it.get_record_length(),
                "digest_ok": rec.digest_checker.passed is not False and not rec.digest_checker.problems})
    return out

def fastwarc_records(path):
    out = []
    with open(path, 'rb') as f:
        for rec in FastIter(f, parse_http=False):
            h = rec.headers
            ok = rec.verify_block_digest(consume=False)
            block = rec.reader.read()
            out.append({"type": h.get('WARC-Type'), "uri": h.get('WARC-Target-URI') or "",
                "id": rec.record_id, "length": rec.content_length,
                "refers_to": h.get('WARC-Refers-To') or "", "block": block.decode('utf-8', 'replace'),
                "digest_ok": ok})
    return out

path = sys.argv[1]
print(json.dumps({"warcio": warcio_records(path), "fastwarc": fastwarc_records(path)}))
