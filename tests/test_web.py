"""The online side of `search` and `visit`: settings, retry timing, address and URL rules, page text, and the tools
under hostile input: gzip bombs and endless bodies in record mode, damaged caches, the SSRF guard in front of the
cache, IPv6 forms that embed private IPv4, credentials in URLs, cut and fuzzed cassettes, binary bodies sent as text,
atomic writes, titles and extractions in linear time, and a page trafilatura would take minutes over, stopped at its
time limit.

Every server here listens on 127.0.0.1; nothing reaches any other address.
"""
import asyncio, base64, email.utils, json, random, re, http.server, os, sqlite3, sys, threading, time, tracemalloc
import warnings, zlib
from collections import Counter
from pathlib import Path
import httpx, pytest
from hypothesis import given, settings, strategies as st
from conftest import ReplyHandler, stream_body
from venus_nb import web as W
from venus_nb.web import (Fetched, ToolConfig, ToolError, address_error, backoff_delay, page_of, retry_after,
                          url_error, Cache, Cassette, make_client)
from venus_nb.tools import Toolbox, web_visit
from venus_nb.trajectory import ToolCall
from venus_nb.base import save_config

def run(coro): return asyncio.run(coro)

# --- config ---

def test_config_defaults_and_validation(tmp_path):
    c = ToolConfig()
    assert (c.top_k, c.timeout, c.allow_hosts) == (10, 150.0, ())
    assert (ToolConfig.load(ToolConfig(allow_hosts=['[::1]', 'Example.ORG']).save(tmp_path/'c.json')).allow_hosts
            == ('::1', 'example.org'))
    (tmp_path/'x.json').write_text('{"top_k": 3, "colour": "red"}')
    with pytest.raises(ValueError, match='unknown setting colour; valid: top_k'): ToolConfig.load(tmp_path/'x.json')
    for bad in [dict(top_k=0), dict(retries=-1), dict(search_api='bing'), dict(request_timeout=0)]:
        with pytest.raises(ValueError): ToolConfig(**bad)

# --- retry timing ---

def test_retry_after_forms():
    now = email.utils.parsedate_to_datetime('Wed, 21 Oct 2015 07:28:00 GMT').timestamp()
    assert retry_after('120') == 120.0 and retry_after('Wed, 21 Oct 2015 07:28:30 GMT', now) == 30.0
    assert retry_after('Wed, 21 Oct 2015 07:27:00 GMT', now) == 0.0
    assert [retry_after(v) for v in (None, '', 'later', '1.5', '-1')] == [None] * 5

@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40))
def test_retry_after_never_raises(v):
    r = retry_after(v)
    assert r is None or r >= 0

def test_backoff_grows_with_jitter_and_is_capped():
    c, rng = ToolConfig(backoff=1, backoff_max=10), random.Random(1)
    for a in range(8):
        d = min(10, 2 ** a)
        assert all(d / 2 <= backoff_delay(a, c, rng=rng) <= d for _ in range(50))
    assert backoff_delay(0, c, 3.0) == 3.0 and backoff_delay(0, c, 99.0) == 10

# --- addresses ---

@settings(max_examples=300, deadline=None)
@given(st.one_of(st.ip_addresses(v=4), st.ip_addresses(v=6)))
def test_address_error_refuses_exactly_the_non_global(ip):
    "Non-global addresses are refused, as are IPv6 addresses carrying a non-global IPv4 one (6to4, Teredo, NAT64, ...)"
    a = ip.ipv4_mapped if getattr(ip, 'ipv4_mapped', None) else ip
    special = any(getattr(a, f'is_{k}', False)
                  for k in ('loopback', 'link_local', 'site_local', 'unspecified', 'multicast', 'private', 'reserved'))
    carried = W.embedded_ipv4(a)
    assert (address_error(str(ip)) is None) == (a.is_global and not special
                                                and all(address_error(str(v4)) is None for v4 in carried))
    if carried and address_error(str(ip)) and a.is_global and not special:
        assert 'embeds' in address_error(str(ip))

def test_a_deprecated_site_local_address_is_refused():
    "fec0::/10 is not routable on the internet (Python still calls it global): refused with the other non-global ones"
    assert address_error('fec0::1') == 'a site-local address' and address_error('2001:4860:4860::8888') is None

@pytest.mark.parametrize('url,err', [('https://example.org/a', None), ('http://example.org', None),
    ('HTTP://Example.org/', None), ('ftp://example.org', "scheme 'ftp' is not allowed"),
    ('example.org/a', "scheme '(none)' is not allowed"), ('', 'the URL is empty'), (None, 'the URL is empty'),
    ('http://[bad', 'invalid host'), ('http://exa mple.org', 'invalid host'), ('http://[::1', 'malformed URL'),
    ('https://' + 'a' * 5000, 'the URL is too long')])
def test_url_error(url, err):
    got = url_error(url)
    assert got is None if err is None else got.startswith(err)

# --- page text ---

def fetched(body, ctype=None, status=200):
    return Fetched('https://x.org/p', status, httpx.Headers({'content-type': ctype} if ctype else {}), body)

def test_page_of_html_keeps_the_article():
    html = ('<html><head><title>T &amp; co</title></head><body><nav>Home About Contact</nav>'
            '<article><h1>Main heading</h1>'
            + ''.join(f'<p>Paragraph {i} says the tower opened in 1889 and is in Paris, France.</p>' for i in range(6))
            + '</article><footer>Copyright 2024</footer></body></html>').encode()
    p = page_of(fetched(html, 'text/html'), ToolConfig())
    assert p.title == 'T & co' and '# Main heading' in p.text and 'Paragraph 5' in p.text and 'Copyright' not in p.text

def test_page_of_rejects_and_caps():
    with pytest.raises(ToolError, match='HTTP 500'): page_of(fetched(b'x', 'text/plain', 500), ToolConfig())
    with pytest.raises(ToolError, match='no readable text'): page_of(fetched(b'   ', 'text/plain'), ToolConfig())
    with pytest.raises(ToolError, match='video/mp4 is not text'): page_of(fetched(b'x', 'video/mp4'), ToolConfig())
    p = page_of(fetched(b'abcdefghij' * 10, 'text/plain'), ToolConfig(max_chars=25))
    assert p.text == ('abcdefghij' * 3)[:25] and p.truncated
    assert page_of(fetched('é'.encode('utf-8'), 'text/plain; charset=bogus-charset'), ToolConfig()).text == 'é'

# ---------------------------------------------------------------------------------------------------------------------
# The tools under hostile input; every server here listens on 127.0.0.1

MB = 1 << 20
HTML = (b'<html><head><title>Tower</title></head><body><article><h1>The Eiffel Tower</h1>'
        b'<p>The Eiffel Tower opened in March 1889.</p></article></body></html>')

def gzip_bomb(n:int)->bytes:
    "`n` bytes of the same two words, gzipped (about 1000x smaller)"
    z, words = zlib.compressobj(9, zlib.DEFLATED, 31), b'bomb words ' * (MB // 11)
    return b''.join(z.compress(words) for _ in range(n // len(words))) + z.flush()

BOMB = gzip_bomb(32 * MB)
# one table row of 50,000 cells (0.75 MB): trafilatura takes about 9 s over it (quadratic in a row's cells)
WIDE = ('<html><head><title>Wide</title></head><body><table><tr>' + ''.join(f'<td>c{j}</td>' for j in range(50_000))
        + '</tr></table></body></html>').encode()
ENDLESS = 64 * MB   # "endless": the server gives up after this much, so a broken client cannot eat the machine

class Handler(ReplyHandler):

    def do_GET(self):
        s, path = self.server, self.path.split('?')[0]
        s.hits[path] += 1
        if self.headers.get('Authorization'): s.auth.append(self.headers['Authorization'])
        if path == '/page': return self.reply(body=HTML)
        if path == '/text': return self.reply(body=b'plain words about the tower', ctype='text/plain')
        if path == '/bomb': return self.reply(body=BOMB, ctype='text/plain', headers=[('Content-Encoding', 'gzip')])
        if path == '/endless': return self.endless()
        if path == '/drip': return self.drip()
        if path == '/nul':
            return self.reply(body=b'GIF89a\x00\x00\x01\x00 words after the nul bytes', ctype='text/plain')
        if path == '/nul-html':
            return self.reply(body=b'<html><body>\x00\x00\x00 secret binary</body></html>', ctype='text/html')
        if path == '/utf16':
            return self.reply(body='caf\xe9 au lait'.encode('utf-16'), ctype='text/plain; charset=utf-16')
        if path == '/wide': return self.reply(body=WIDE)
        if path == '/to-creds':
            return self.reply(302, b'', None, [('Location', f'http://user:s3cret@127.0.0.1:{s.server_port}/page')])
        self.reply(404, b'not found', 'text/plain')

    def endless(self):
        self.send_response(200)
        self.send_header('Content-Type', 'text/plain')
        self.end_headers()   # no length: read to the end
        stream_body(self, b'endless words ' * 4681, ENDLESS)

    def drip(self):
        self.send_response(200)
        self.send_header('Content-Type', 'text/plain')
        self.end_headers()
        try:
            for _ in range(200):
                self.wfile.write(b'x')
                self.wfile.flush()
                time.sleep(0.1)
        except (BrokenPipeError, ConnectionResetError): pass

class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    def handle_error(self, request, client_address):
        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            super().handle_error(request, client_address)

@pytest.fixture(scope='module')
def server():
    srv = Server(('127.0.0.1', 0), Handler)
    srv.hits, srv.auth, srv.sent = Counter(), [], 0
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    srv.base = f'http://127.0.0.1:{srv.server_port}'
    yield srv
    srv.shutdown()
    srv.server_close()

def cfg(**kw):
    return ToolConfig(**{'allow_hosts': ('127.0.0.1',), 'backoff': 0.01, 'retries': 0, 'request_timeout': 5, **kw})

async def _page_through(tape, url, c, inner=None):
    "The page (text only, no summary) at `url`, its HTTP through a cassette (recording when `inner` is given)"
    async with Toolbox.web(c, make_client(c, Cassette(tape, inner=inner))) as tb: return await tb.page(url)

async def _visit_through(tape, url, c, inner=None):
    "A visit whose HTTP goes through a cassette (recording when `inner` is given)"
    async with Toolbox.web(c, make_client(c, Cassette(tape, inner=inner))) as tb:
        return await tb.run(ToolCall('visit', {'url': url, 'goal': 'what is it'}))

def peak_memory(fn):
    "`fn()`'s result and the peak of Python memory allocated while it ran"
    tracemalloc.start()
    try:
        out = fn()
        return out, tracemalloc.get_traced_memory()[1]
    finally: tracemalloc.stop()

# --- 2. record mode honours the byte cap and the timeouts ---

def test_record_mode_caps_a_gzip_bomb(server, tmp_path):
    tape, c, url = tmp_path/'bomb.jsonl', cfg(max_bytes=MB), f'{server.base}/bomb'
    recorded, peak = peak_memory(lambda: run(_page_through(tape, url, c, httpx.AsyncHTTPTransport())))
    (rec,) = [json.loads(l) for l in tape.read_text().split('\n') if l]
    assert rec['truncated'] is True and len(rec['body']) <= MB * 4 // 3 + 4 and tape.stat().st_size < 2 * MB
    assert peak < 16 * MB, f'peak {peak / MB:.0f} MB for a 1 MB cap'
    assert recorded.truncated and len(recorded.text) == c.max_chars and recorded.text.startswith('bomb words')
    assert run(_page_through(tape, url, c)) == recorded   # the recording replays as cut

def test_visit_caps_a_gzip_bomb_as_it_inflates(server):
    "Without a cassette too: the body is inflated a piece at a time, never a whole network chunk's 1000x at once"
    async def go():
        async with make_client(c) as client: return await W.fetch_page(f'{server.base}/bomb', c, client)
    c = cfg(max_bytes=MB)
    f, peak = peak_memory(lambda: run(go()))
    assert f.truncated and len(f.body) == MB and peak < 16 * MB, f'peak {peak / MB:.0f} MB for a 1 MB cap'

def test_record_mode_caps_an_endless_body(server, tmp_path):
    tape, c = tmp_path/'endless.jsonl', cfg(max_bytes=MB)
    server.sent = 0
    page, peak = peak_memory(lambda: run(_page_through(tape, f'{server.base}/endless', c, httpx.AsyncHTTPTransport())))
    for _ in range(100):   # the handler records what it sent once it notices the closed connection
        if server.sent: break
        time.sleep(0.05)
    (rec,) = [json.loads(l) for l in tape.read_text().split('\n') if l]
    assert rec['truncated'] is True and len(rec['body']) <= MB * 4 // 3 + 4 and server.sent < ENDLESS // 2
    assert peak < 16 * MB and page.truncated and page.text.startswith('endless words')

def test_record_mode_has_the_request_timeout(server, tmp_path):
    "A cassette under a plain httpx client (no `send` around it) still stops a body that drips forever"
    async def go():
        async with httpx.AsyncClient(transport=Cassette(tmp_path/'drip.jsonl', httpx.AsyncHTTPTransport(),
                                                        cfg(request_timeout=0.5))) as client:
            return await client.get(f'{server.base}/drip')
    t0 = time.perf_counter()
    with pytest.raises(httpx.TimeoutException, match='0.5 s'): run(go())
    assert time.perf_counter() - t0 < 10 and not (tmp_path/'drip.jsonl').exists()   # the drip lasts 20 s

# --- 8. a damaged cache is set aside and rebuilt ---

class Counting:
    "A cacheable search backend that counts its calls"
    cacheable, cache_id = True, 'counting'
    def __init__(self): self.n = 0
    async def search(self, q, k):
        self.n += 1
        return [dict(title=q, url=f'https://example.org/{self.n}', snippet='s')]

def search_once(tb, q='tower'): return run(tb.run(ToolCall('search', {'query': [q]})))

def test_garbage_cache_file_is_set_aside_and_rebuilt(tmp_path):
    (p := tmp_path/'cache.sqlite').write_bytes(b'this is not a database' * 100)
    with pytest.warns(RuntimeWarning, match='is damaged') as w:
        tb = Toolbox(backend := Counting(), cfg=ToolConfig(cache_path=str(p)))
    assert len(w) == 1 and 'moved it to' in str(w[0].message)
    (aside,) = tmp_path.glob('cache.sqlite.corrupt-*')
    assert aside.read_bytes() == b'this is not a database' * 100
    assert search_once(tb) == search_once(tb) and backend.n == 1 and len(tb.cache) == 1

def test_cache_damaged_during_use_is_rebuilt_and_refetched(tmp_path):
    p = tmp_path/'cache.sqlite'
    Cache(p).close()
    with sqlite3.connect(p) as db:
        db.executemany('insert into results values (?, ?)',
                       [(Cache.key('k', i), '"' + 'x' * 1000 + '"') for i in range(300)])
    db.close()
    tb = Toolbox(backend := Counting(), cfg=ToolConfig(cache_path=str(p)))
    data = bytearray(p.read_bytes())
    data[4096:] = random.Random(0).randbytes(len(data) - 4096)   # page 1 (the schema) intact, every other page garbage
    p.write_bytes(bytes(data))
    with pytest.warns(RuntimeWarning, match='is damaged') as w: first = search_once(tb)
    assert len(w) == 1 and backend.n == 1 and json.loads(first)[0]['web_page_info_list'][0]['url'] == 'https://example.org/1'
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        assert search_once(tb) == first and backend.n == 1   # the rebuilt cache answers, no second warning
    assert len(list(tmp_path.glob('cache.sqlite.corrupt-*'))) == 1

def test_unreadable_cached_value_is_a_miss(tmp_path):
    tb = Toolbox(backend := Counting(), cfg=ToolConfig(cache_path=str(tmp_path/'c.sqlite')))
    search_once(tb)
    tb.cache.db.execute("update results set value = 'not json {'")
    assert json.loads(search_once(tb))[0]['web_page_info_list'][0]['url'] == 'https://example.org/2' and backend.n == 2

# --- 10. the SSRF guard before the cache; IPv6 that embeds IPv4; credentials; cut cassettes; NUL bytes ---

def test_cache_does_not_answer_a_url_the_guard_now_refuses(server, tmp_path):
    path = str(tmp_path/'cache.sqlite')
    assert 'opened in March 1889' in run(web_visit(f'{server.base}/page', 'when', cfg(cache_path=path)))
    n = server.hits['/page']
    obs = run(web_visit(f'{server.base}/page', 'when', ToolConfig(cache_path=path)))   # 127.0.0.1 no longer allowed
    assert (obs == f'[visit error] {server.base}/page: refused: 127.0.0.1 is a loopback address'
            and server.hits['/page'] == n)

EMBEDDED = [('2002:7f00:1::', '127.0.0.1'), ('2002:7f00:1::1', '127.0.0.1'), ('2002:a9fe:a9fe::1', '169.254.169.254'),
            ('2002:a00:1::1', '10.0.0.1'), ('2002:c0a8:101::', '192.168.1.1'), ('::127.0.0.1', '127.0.0.1'),
            ('::a00:1', '10.0.0.1'), ('::ffff:0:7f00:1', '127.0.0.1'), ('64:ff9b::7f00:1', '127.0.0.1'),
            ('64:ff9b::a9fe:a9fe', '169.254.169.254'),
            ('2001:0:4136:e378:8000:63bf:80ff:fffe', '127.0.0.1'),
            ('2001:0:4136:e378:8000:63bf:f5ff:fffe', '10.0.0.1')]

@pytest.mark.parametrize('ip,v4', EMBEDDED, ids=[ip for ip, _ in EMBEDDED])
def test_ipv6_that_embeds_a_private_ipv4_is_refused(ip, v4):
    why = address_error(ip)
    assert why and f'embeds {v4}' in why, why
    sent = []
    client = httpx.AsyncClient(
        transport=httpx.MockTransport(lambda r: sent.append(r) or httpx.Response(200, text='leak')))
    obs = run(web_visit(f'http://[{ip}]/latest/meta-data/', 'read it', ToolConfig(), client))
    assert f'embeds {v4}' in obs and obs.startswith('[visit error]') and sent == []

def test_mapped_loopback_keeps_its_plain_reason():
    assert address_error('::ffff:127.0.0.1') == 'a loopback address' and address_error('2002:5db8:d70e::1') is None
    # local-use NAT64 (its prefix length is the operator's choice): refused whole
    assert address_error('64:ff9b:1::a00:1')

@pytest.mark.parametrize('url', ['http://user:s3cret@{host}/page', 'http://user@{host}/page',
                                 'http://:s3cret@{host}/page', 'http://user:s3cret@{host}@{host}/page'])
def test_credentials_in_a_url_are_refused_and_never_echoed(server, url):
    url = url.format(host=f'127.0.0.1:{server.server_port}')
    n = server.hits['/page']
    obs = run(web_visit(url, 'read it', cfg()))
    assert obs.startswith('[visit error] http://***@127.0.0.1:') and 'credentials' in obs, obs
    assert 's3cret' not in obs and 'user' not in obs and server.hits['/page'] == n and server.auth == []
    assert url_error(url).startswith('the URL carries credentials')

def test_redirect_to_a_url_with_credentials_is_refused_and_not_echoed(server):
    obs = run(web_visit(f'{server.base}/to-creds', 'read it', cfg()))
    assert 'credentials' in obs and 's3cret' not in obs and server.auth == []

def record_tape(server, tape, paths=('/page', '/text')):
    for p in paths: run(_visit_through(tape, f'{server.base}{p}', cfg(), httpx.AsyncHTTPTransport()))
    return [run(_visit_through(tape, f'{server.base}{p}', cfg())) for p in paths]

@pytest.mark.filterwarnings('ignore:.*unreadable line')
def test_cassette_with_a_cut_last_line_loads_the_whole_ones(server, tmp_path):
    tape = tmp_path/'tape.jsonl'
    page, text = record_tape(server, tape)
    whole = tape.read_bytes()
    tape.write_bytes(whole[:len(whole) - 40])   # the recording was killed while writing its last line
    with pytest.warns(RuntimeWarning, match='1 unreadable line'): cas = Cassette(tape)
    assert ([(e.index, e.reason.split(':')[0]) for e in cas.errors]
            == [(2, 'cut short (no newline at the end of the file)')])
    assert run(_visit_through(tape, f'{server.base}/page', cfg())) == page
    assert 'ReplayMiss' in run(_visit_through(tape, f'{server.base}/text', cfg()))

def test_cassette_bad_lines_are_reported_with_their_line(server, tmp_path):
    tape = tmp_path/'tape.jsonl'
    record_tape(server, tape)
    good = tape.read_text().split('\n')[:2]
    bad = ['{"key": "GET x", "status": "two hundred", "headers": [], "body": ""}', 'garbage \x00', '[' * 100_000,
           '{"key": "GET y", "status": 200, "headers": [["a"]], "body": ""}',
           '{"key": "GET z", "status": 200, "headers": [], "body": "%%%"}']
    tape.write_text('\n'.join([good[0], *bad, '', good[1]]) + '\n')
    with pytest.warns(RuntimeWarning, match='5 unreadable lines'): cas = Cassette(tape)
    assert [e.index for e in cas.errors] == [2, 3, 4, 5, 6] and all(e.source == str(tape) for e in cas.errors)
    assert sum(map(len, cas.replies.values())) == 2

def test_nul_bytes_mean_binary_even_when_the_type_says_text(server):
    for path in ('/nul', '/nul-html'):
        obs = run(web_visit(f'{server.base}{path}', 'what does it say', cfg()))
        assert obs == f'[visit error] {server.base}{path}: the body is binary (it has NUL bytes), not text'
    assert 'café au lait' in run(web_visit(f'{server.base}/utf16', 'what', cfg()))   # UTF-16 text has NULs and is text
    with pytest.raises(ToolError, match='binary'):
        page_of(Fetched('https://x.org', 200, httpx.Headers({'content-type': 'application/json'}), b'{"a": "\x00"}'),
                ToolConfig())

# --- 9. atomic writes; corpus lines split at '\n' only ---

@pytest.fixture
def failing_rename(monkeypatch):
    "Every `os.replace` fails, as a full disk or a kill at that moment would"
    def boom(*a): raise OSError('disk full (simulated)')
    monkeypatch.setattr(os, 'replace', boom)

def test_cassette_appends_and_config_writes_are_whole_or_nothing(server, tmp_path, failing_rename):
    tape, conf = tmp_path/'tape.jsonl', tmp_path/'tools.json'
    tape.write_text('{"earlier": "recording"}\n')
    conf.write_text('{"top_k": 3}')
    obs = run(_visit_through(tape, f'{server.base}/page', cfg(), httpx.AsyncHTTPTransport()))
    lines = tape.read_text().splitlines()   # a cassette is appended to (no rename to fail), the earlier line untouched
    assert ('disk full' not in obs and len(lines) == 2 and lines[0] == '{"earlier": "recording"}'
            and json.loads(lines[1])['status'] == 200)
    with pytest.raises(OSError, match='disk full'): save_config(ToolConfig(top_k=7), conf)
    assert (conf.read_text() == '{"top_k": 3}'
            and sorted(f.name for f in tmp_path.iterdir()) == ['tape.jsonl', 'tools.json'])

# --- fuzz: no crash, in = kept + dropped, linear time (two sizes in one run) ---

def fuzz_lines(n:int, rng:random.Random, good)->list[bytes]:
    "A mix of good records, random bytes, nested brackets, huge strings and line breaks other than '\\n'"
    kinds = [lambda: good(rng), lambda: rng.randbytes(rng.randrange(1, 200)).replace(b'\n', b' '),
             lambda: b'[' * rng.randrange(1, 3000), lambda: b'{"id": "' + b'x' * rng.randrange(1000, 20000) + b'"',
             lambda: json.dumps({'id': 'u\u2028', 'text': 'a\x85b'}).encode(), lambda: b'{"a": 1}', lambda: b'',
             lambda: b'null', lambda: json.dumps({'id': rng.random(), 'text': [1, {}]}).encode()]
    return [rng.choice(kinds)() for _ in range(n)]

def best_time(fn, reps=3):
    "The fastest of a few runs (other processes share the machine)"
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return min(out)

def test_fuzz_cassette_loading_counts_and_stays_linear(tmp_path):
    good = lambda rng: json.dumps({'key': f'GET http://x/{rng.random()} 0', 'status': 200, 'headers': [['a', 'b']],
                                   'body': 'aGk='}).encode()
    def check(n, seed):
        lines = fuzz_lines(n, random.Random(seed), good)
        (p := tmp_path/f'c{n}-{seed}.jsonl').write_bytes(b'\n'.join(lines))
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')
            cas = Cassette(p)
        assert sum(map(len, cas.replies.values())) + len(cas.errors) == sum(1 for l in lines if l.strip()), (n, seed)
        return p
    for seed in range(20): check(50, seed)
    small, big = check(500, 1), check(2000, 2)
    def load(p):
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')
            Cassette(p)
    t1, t4 = best_time(lambda: load(small)), best_time(lambda: load(big))
    assert t4 < 8 * t1 + 0.05, (t1, t4)

TITLE_RE = re.compile(r'<title[^>]*>(.*?)</title>', re.S | re.I)

@pytest.mark.parametrize('html', ['<html><head><title>T &amp; co</title></head></html>', '<TITLE lang="en">Up</Title>',
                                  '<title>no end', '<title no close', 'x<title>a</title><title>b</title>',
                                  '<titlex>odd</title>', '', '<title></title>'])
def test_page_title_agrees_with_the_regex(html):
    m = TITLE_RE.search(html)
    assert W._title(html) == (W.unescape(m[1]).strip() if m else '')

def test_page_title_is_linear():
    "A page of 8,000 unclosed `<title>` tags took 9 s in the regex (and 2 minutes at the 200 KB it reads)"
    t1, t4 = best_time(lambda: W._title('<title>' * 7000)), best_time(lambda: W._title('<title>' * 28000))
    assert t4 < 8 * t1 + 0.01, (t1, t4)

def test_parse_extraction_time_is_bounded():
    "The json5 fallback took 3.4 s on a 100 KB reply; past `EXTRACTION_JSON5_MAX_CHARS` only strict JSON is read"
    def bad(n): return '{"summary": "s", "evidence": [' + '1,' * n + '],}'   # trailing commas: not strict JSON
    t1, t4 = best_time(lambda: W.parse_extraction(bad(50_000))), best_time(lambda: W.parse_extraction(bad(200_000)))
    assert W.parse_extraction(bad(50_000)) is None and t4 < 8 * t1 + 0.01, (t1, t4)
    # long and strict: read
    assert W.parse_extraction('{"summary": "s", "evidence": "' + 'x' * 500_000 + '"}') == ('x' * 500_000, 's')
    assert W.parse_extraction("{'summary': 's', 'evidence': 'e',}") == ('e', 's')

def test_replaying_a_missing_cassette_warns(tmp_path):
    with pytest.warns(RuntimeWarning, match='no such cassette'): cas = Cassette(tmp_path/'typo.jsonl')
    assert cas.replies == {} and cas.errors == []

# --- 5. one page cannot tie up the CPU: trafilatura runs in a worker process, killed at `extract_timeout` ---

def children_cpu()->float:
    "CPU seconds of this process's live child processes (Linux /proc)"
    tick, total = os.sysconf('SC_CLK_TCK'), 0.0
    for d in os.listdir('/proc'):
        if not d.isdigit(): continue
        try: f = open(f'/proc/{d}/stat').read().rsplit(')', 1)[1].split()
        except OSError: continue
        if int(f[1]) == os.getpid(): total += (int(f[11]) + int(f[12])) / tick
    return total

@pytest.mark.skipif(not os.path.exists('/proc/self/stat'), reason="reads the children's CPU from /proc (Linux)")
def test_one_page_cannot_tie_up_the_cpu(server):
    c = cfg(extract_timeout=2)
    async def go():
        async with Toolbox.web(c, make_client(c)) as tb: return await tb.page(f'{server.base}/wide')
    t0 = time.monotonic()
    page = run(go())
    took = time.monotonic() - t0
    assert took < 10, f'{took:.1f} s for a page with a 2 s extraction limit'
    assert 'trafilatura took over 2 s' in page.note and 'c0' in page.text and 'c49999' in page.text, page.note
    cpu, kids = time.process_time(), children_cpu()
    time.sleep(1)   # nothing goes on computing the page: not a thread here, not a worker process
    assert time.process_time() - cpu < 0.3 and children_cpu() - kids < 0.3

def test_ordinary_pages_read_the_same_in_the_extraction_process():
    rng = random.Random(0)
    words = 'tower river town merchant founded century lake bridge museum station railway harbour'.split()
    paras = ''.join(f'<h2>Part {k}</h2><p>' + ' '.join(rng.choices(words, k=60)) + '.</p>' for k in range(200))
    table = '<table><tr><th>a</th><th>b</th></tr>' + '<tr><td>1</td><td>2</td></tr>' * 50 + '</table>'
    for html in (HTML.decode(), f'<html><body><article><h1>Long</h1>{paras}{table}</article></body></html>'):
        assert W.main_text(html, 20) == (W._main_text(html), '') == W.main_text(html)

@pytest.mark.skipif(not os.path.exists('/proc/self/stat'), reason="reads the children's CPU from /proc (Linux)")
def test_a_visit_that_times_out_stops_its_page_extraction(server):
    "The tool's 2 s timeout ends the visit, and the page's worker with it (its own 20 s limit is not waited for)"
    c = cfg(timeout=2)
    async def go():
        async with Toolbox.web(c, make_client(c)) as tb:
            return await tb.run(ToolCall('visit', {'url': f'{server.base}/wide', 'goal': 'the cells'}))
    t0 = time.monotonic()
    out = run(go())   # asyncio.run also waits for the worker thread that reads the page
    took = time.monotonic() - t0
    assert 'timed out after 2 s' in out and took < 6, (out, f'{took:.1f} s')
    kids = children_cpu()
    time.sleep(1)
    assert children_cpu() - kids < 0.3

# ---- cassettes are appended one line per request

def record(tape:Path, n:int):
    "Record `n` requests (2 KiB bodies) through a `Cassette` into `tape`"
    inner = httpx.MockTransport(lambda req: httpx.Response(200, content=b'w' * 2048,
                                                           headers={'content-type': 'text/plain'}))
    async def go():
        async with httpx.AsyncClient(transport=Cassette(tape, inner=inner)) as c:
            for i in range(n): await c.get(f'https://example.org/page/{i}')
    asyncio.run(go())

def written_bytes()->int:
    "Bytes this process has handed to `write` so far"
    return int(next(l for l in Path('/proc/self/io').read_text().splitlines() if l.startswith('wchar')).split()[1])

@pytest.mark.skipif(not Path('/proc/self/io').exists(), reason='counts written bytes with /proc/self/io (Linux)')
def test_cassette_recording_writes_each_request_once(tmp_path):
    tape = tmp_path/'tape.jsonl'
    before = written_bytes()
    record(tape, 60)
    cost = written_bytes() - before
    assert cost < 2 * tape.stat().st_size, f'{cost:,} bytes written for a {tape.stat().st_size:,}-byte cassette'

def test_cassette_cut_last_line_then_recording_goes_on(tmp_path):
    tape = tmp_path/'tape.jsonl'
    record(tape, 3)
    whole = tape.read_bytes()
    tape.write_bytes(whole[:-40])   # killed while writing its last line
    record(tape, 2)                                               # pages 0 and 1 again, on lines of their own
    with pytest.warns(RuntimeWarning, match='1 unreadable line'): cas = Cassette(tape)
    assert [(e.index, e.reason.split(':')[0]) for e in cas.errors] == [(3, 'not JSON')]
    assert (sorted((k.split()[1], len(v)) for k, v in cas.replies.items())
            == [('https://example.org/page/0', 2), ('https://example.org/page/1', 2)])

def test_no_cookie_is_kept_between_requests():
    """Requests go to the checked address with the name in Host: a kept cookie would be filed under the address and
    sent to every site behind it, so the client keeps none"""
    sent = []
    def site(req):
        sent.append(req.headers.get('cookie'))
        return httpx.Response(200, headers={'set-cookie': 'sess=SECRET; Path=/'}, text='ok')
    async def two_sites():
        async with make_client(ToolConfig(), httpx.MockTransport(site)) as client:
            await client.get('http://127.0.0.1/a', headers={'Host': 'site-a.test'})
            await client.get('http://127.0.0.1/b', headers={'Host': 'site-b.test'})
            return len(client.cookies.jar)
    assert asyncio.run(two_sites()) == 0 and sent == [None, None]

def test_a_cache_another_process_holds_is_a_miss_not_a_failure(tmp_path):
    "While another connection holds the cache, a lookup misses and a store is skipped, once said; the tool goes on"
    from venus_nb.web import Cache
    c = Cache(tmp_path/'tools.sqlite')
    c.put('k', {'v': 1})
    other = sqlite3.connect(tmp_path/'tools.sqlite', isolation_level=None)
    other.execute('begin exclusive')
    try:
        with pytest.warns(RuntimeWarning, match='is busy'):
            assert c.get('k') is None
        c.put('k2', 2)
    finally:
        other.execute('rollback')
        other.close()
    assert c.get('k') == {'v': 1} and c.get('k2') is None

# --- replay offline ---

def test_a_recording_replays_with_no_dns(tmp_path, monkeypatch):
    "A visit replayed from a cassette (a redirect, the cache) asks no resolver; private addresses are still refused"
    import socket
    real, asked = socket.getaddrinfo, []
    def no_dns(host, port, family=0, type=0, proto=0, flags=0):
        if not flags & socket.AI_NUMERICHOST:
            asked.append(host)
            raise socket.gaierror(socket.EAI_AGAIN, 'no network')
        return real(host, port, family, type, proto, flags)
    key = lambda url: W.exchange_key(httpx.Request('GET', url))
    html = (b'<html><head><title>Tower</title></head><body><p>The tower opened in March 1889 to the public.</p>'
            b'</body></html>')
    recs = [dict(key=key('https://example.org/old'), status=301, headers=[['location', '/new']], body=''),
            dict(key=key('https://example.org/new'), status=200, headers=[['content-type', 'text/html']],
                 body=base64.b64encode(html).decode())]
    (tape := tmp_path/'tape.jsonl').write_text(''.join(json.dumps(r) + '\n' for r in recs))
    monkeypatch.setattr(socket, 'getaddrinfo', no_dns)
    c = ToolConfig(cache_path=str(tmp_path/'cache.sqlite'), retries=0)
    async def visit(url):
        async with Toolbox.web(c, make_client(c, Cassette(tape))) as tb: return await tb.page(url)
    page = run(visit('https://example.org/old'))
    assert (page.url, page.title) == ('https://example.org/new', 'Tower') and 'March 1889' in page.text
    assert run(visit('https://example.org/old')) == page and asked == []   # from the cache, checked without a lookup
    for url, why in (('http://localhost:8000/', 'localhost resolves to 127.0.0.1, a loopback'),
                     ('http://0x7f000001/', '0x7f000001 resolves to 127.0.0.1, a loopback'),
                     ('http://[::1]/', '::1 is a loopback')):
        with pytest.raises(ToolError, match=re.escape(why)): run(visit(url))
    with pytest.raises(W.ReplayMiss, match='GET https://example.com/'): run(visit('https://example.com/'))
    assert asked == []
    # a client that records still looks names up
    async def recorded(url):
        async with Toolbox.web(c, make_client(c, Cassette(tmp_path/'new.jsonl', httpx.AsyncHTTPTransport()))) as tb:
            return await tb.page(url)
    with pytest.raises(ToolError, match='cannot resolve example.net: .*no network'): run(recorded('https://example.net/'))
    assert asked == ['example.net']
