"""`search` and `visit`: their arguments, the toolbox on a corpus (bad calls and any call give an observation), and the
web tools against a real HTTP server started here on 127.0.0.1 (allowed with `allow_hosts`): retries, timeouts,
caps, content types, redirects, the SSRF table, search backends, summarisers, the cache and record/replay.

Nothing here connects anywhere but the loopback server: refused addresses are refused before any connection, which
`no_connections` checks by making every Python socket connect fail the test.
"""
import asyncio, json, http.server, socket, sys, threading, time
from collections import Counter
import httpx, pytest
from hypothesis import given, settings, strategies as st, HealthCheck
from conftest import ReplyHandler, stream_body
from test_web import run
from venus_nb import web as W, schema as S
from venus_nb.corpus import Doc, LocalCorpus, load_corpus
from venus_nb.web import ToolConfig, Cassette, fetch_page, make_client
from venus_nb.tools import Toolbox, run_tool, search_args, visit_args, web_visit, web_search
from venus_nb.schema import parse_visit_observation
from venus_nb.trajectory import ToolCall, parse_call_body

WORLD = [Doc('oskelby', 'Oskelby',
             'Oskelby is a town on the northern shore of Lake Varnholm.\n\nIt was founded in 1612 by Henrik Dalgaard.',
             'https://wiki.example/Oskelby'),
         Doc('dalgaard', 'Henrik Dalgaard', 'Henrik Dalgaard (1581–1650) was a merchant born in Tarsvik.'),
         Doc('tarsvik', 'Tarsvik', 'Tarsvik is the capital of Estmark, a port on the Gray Sea.', 'https://wiki.example/Tarsvik'),
         Doc('brennstad', 'Brennstad', 'Brennstad is a village on the southern shore of Lake Varnholm.')]

@pytest.fixture(scope='module')
def world(): return LocalCorpus(WORLD, 'world')

# --- arguments ---

@pytest.mark.parametrize('args,out', [({'query': 'a'}, (['a'], None)), ({'query': ['a', 'b']}, (['a', 'b'], None)),
    ({}, (None, 'search needs "query": a list of strings')),
    ({'query': []}, (None, '"query" must be a string or a non-empty list of strings')),
    ({'query': ['a', '']}, (None, 'every "query" must be a non-empty string')),
    ({'query': [1]}, (None, 'every "query" must be a non-empty string')),
    ({'query': ['q'] * 21}, (None, 'too many queries (21; at most 20)')),
    ('query', (None, 'search needs "query": a list of strings'))])
def test_search_args(args, out): assert search_args(args) == out

@pytest.mark.parametrize('args,err', [({'url': 'u', 'goal': 'g'}, None), ({'url': ['u', 'v'], 'goal': 'g'}, None),
    ({'goal': 'g'}, 'visit needs "url"'), ({'url': 'u'}, 'visit needs "goal"'),
    ({'url': 'u', 'goal': 3}, 'visit needs "goal"'), ({'url': None, 'goal': 'g'}, '"url" must be'),
    ({'url': ['u'] * 21, 'goal': 'g'}, 'too many URLs')])
def test_visit_args(args, err):
    got, why = visit_args(args)
    assert (why is None) if err is None else why.startswith(err)

# --- the toolbox on a corpus ---

def test_toolbox_on_a_corpus(world):
    tb = Toolbox(world)
    res = json.loads(run(tb.run(ToolCall('search', {'query': ['founder of Oskelby', 'capital of Estmark']}))))
    assert [r['web_page_info_list'][0]['url'] for r in res] == ['https://wiki.example/Oskelby', 'https://wiki.example/Tarsvik']
    obs = run(tb.run({'name': 'visit', 'arguments': {'url': ['corpus://dalgaard', 'https://nowhere.org'],
                                                     'goal': 'Where was he born?'}}))
    first, second = obs.split(S.PAGE_SEPARATOR)
    assert parse_visit_observation(first)['summary'] == 'Henrik Dalgaard (1581–1650) was a merchant born in Tarsvik.'
    assert second == ("[visit error] https://nowhere.org: not in the corpus 'world' "
                      "(visit a URL from the search results)")

@pytest.mark.parametrize('call,obs', [(None, "[tool error] unknown tool None; the tools are search and visit"),
    (ToolCall('python', {}), "[tool error] unknown tool 'python'; the tools are search and visit"),
    (ToolCall('search', ['a']), '[search error] search needs "query": a list of strings'),
    (ToolCall('visit', {'url': 'corpus://tarsvik'}), '[visit error] visit needs "goal": a non-empty string'),
    ({'name': 'search'}, '[search error] search needs "query": a list of strings')])
def test_bad_calls_are_observations(world, call, obs):
    assert run(run_tool(call, world)) == obs

def test_parsed_model_output_runs(world):
    call, err = parse_call_body("{'name': 'search', 'arguments': {'query': 'Brennstad village',},}")
    assert err is None and json.loads(run(run_tool(call, world)))[0]['web_page_info_list'][0]['title'] == 'Brennstad'

def test_failing_backend_gives_partial_results():
    class Flaky:
        async def search(self, q, k):
            if 'bad' in q: raise RuntimeError('backend exploded')
            return [{'title': q, 'url': 'u', 'snippet': 's'}]
    obs = run(run_tool(ToolCall('search', {'query': ['good', 'bad one']}), Toolbox(Flaky())))
    head, err = obs.split('\n')
    assert json.loads(head)[0]['query'] == 'good' and err == "[search error] 'bad one': RuntimeError: backend exploded"
    assert (run(run_tool(ToolCall('search', {'query': 'bad'}), Toolbox(Flaky())))
            == "[search error] 'bad': RuntimeError: backend exploded")

json_values = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=12)),
                           lambda c: st.one_of(st.lists(c, max_size=3),
                                               st.dictionaries(st.sampled_from(['query', 'url', 'goal', 'x']), c,
                                                               max_size=3)),
                           max_leaves=8)

@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(['search', 'visit', 'other', '']), json_values)
def test_any_call_gives_an_observation(world, name, args):
    obs = run(run_tool(ToolCall(name, args), world))
    assert isinstance(obs, str) and obs
    if obs.startswith('['): assert obs.startswith(('[{', '[search error]', '[visit error]', '[tool error]'))

def test_generated_world_calls_all_run(tmp_path):
    "Every search and visit of 10_synth's expert trajectories works against its own corpus, as written to disk"
    from venus_nb.synth import SAMPLE, generate, write_world
    data = generate(SAMPLE)
    corpus = load_corpus(write_world(data, tmp_path)['corpus'])
    assert len(corpus) == len(data.corpus) and corpus.errors == []
    async def outcomes():
        out = Counter()
        for traj in data.trajectories():
            for turn in (t for t in traj.turns if t.call):
                obs = await run_tool(turn.call, corpus)
                out[turn.call.name, obs.startswith(('[search error]', '[visit error]', '[tool error]'))] += 1
        return out
    got = run(outcomes())
    assert (got[('search', True)] == got[('visit', True)] == 0 and got[('search', False)] > 100
            and got[('visit', False)] > 100)

# ---------------------------------------------------------------------------------------------------------------------
# The web tools against a real HTTP server on 127.0.0.1

HTML = b'<html><head><title>Tower</title></head><body><nav>Menu</nav><article><h1>The Eiffel Tower</h1>' \
       b'<p>The Eiffel Tower opened in March 1889 in Paris.</p><p>It is 330 metres tall.</p></article></body></html>'
CHUNK = b'<p>' + b'filler words about nothing in particular ' * 40 + b'</p>\n'
HUGE = 50 * 1024 * 1024

class Handler(ReplyHandler):

    def redirect(self, to, status=302): self.reply(status, b'', None, [('Location', to)])

    def do_GET(self):
        s, path = self.server, self.path.split('?')[0]
        s.hits[path] += 1
        n = s.hits[path]
        if path == '/page': return self.reply(body=HTML)
        if path == '/flaky': return self.reply(500, b'oops') if n <= 2 else self.reply(body=HTML)
        if path == '/down': return self.reply(503, b'down')
        if path == '/limited':
            return (self.reply(429, b'slow down', 'text/plain', [('Retry-After', '1')]) if n == 1
                    else self.reply(body=b'finally', ctype='text/plain'))
        if path == '/slow':
            time.sleep(3)
            return self.reply(body=HTML)
        if path == '/huge': return self.huge()
        if path in ('/r1', '/r2'):
            return self.redirect({'/r1': '/r2', '/r2': '/r3'}[path], 302 if path == '/r1' else 307)
        if path == '/r3': return self.redirect(f'http://127.0.0.1:{s.server_port}/page', 301)
        if path == '/loop': return self.redirect('/loop')
        if path == '/to-private': return self.redirect('http://10.0.0.1/admin')
        if path == '/to-file': return self.redirect('file:///etc/passwd')
        if path == '/to-port': return self.redirect(s.other)   # another server's page (`other`)
        if path == '/text': return self.reply(body=b'plain text: the tower opened in 1889', ctype='text/plain')
        if path == '/json': return self.reply(body=b'{"tower": "Eiffel", "opened": 1889}', ctype='application/json')
        if path == '/png': return self.reply(body=b'\x89PNG\r\n\x1a\n' + bytes(64), ctype='image/png')
        if path == '/pdf': return self.reply(body=b'%PDF-1.4 ...', ctype='application/pdf')
        if path == '/untyped': return self.reply(body=b'no type but plain words', ctype=None)
        if path == '/untyped-bin': return self.reply(body=b'\x00\x01\x02binary', ctype=None)
        if path == '/latin1':
            return self.reply(body='caf\xe9 au lait'.encode('latin-1'), ctype='text/plain; charset=iso-8859-1')
        if path == '/search': return self.searxng()
        self.reply(404, b'not found', 'text/plain')

    def huge(self):
        self.send_response(200)
        self.send_header('Content-Type', 'text/html')
        self.send_header('Content-Length', str(HUGE))
        self.end_headers()
        stream_body(self, CHUNK, HUGE)

    def searxng(self):
        with self.server.lock:
            self.server.inflight += 1
            self.server.peak = max(self.server.peak, self.server.inflight)
        time.sleep(0.05)
        with self.server.lock: self.server.inflight -= 1
        q = httpx.URL(self.path).params.get('q', '')
        body = {'results': [{'title': f'{q} result {i}', 'url': f'https://example.org/{i}', 'content': f'about {q}'}
                            for i in range(12)]}
        self.reply(body=json.dumps(body).encode(), ctype='application/json')

    def do_POST(self):
        s, path = self.server, self.path
        s.hits[path] += 1
        body = json.loads(self.rfile.read(int(self.headers.get('Content-Length', 0))) or b'{}')
        if path == '/serper':
            if self.headers.get('X-API-KEY') != 'k123':
                return self.reply(403, b'{"message": "bad key"}', 'application/json')
            s.located = {body['q']: (body.get('location'), body.get('gl'), body.get('hl'))}
            hits = [{'title': f"{body['q']} {i}", 'link': f'https://example.org/{i}', 'snippet': 's', 'position': i}
                    for i in range(body['num'] + 3)]
            return self.reply(body=json.dumps({'organic': hits}).encode(), ctype='application/json')
        if path.endswith('/chat/completions'): return self.chat(body, path.startswith('/bad'))
        self.reply(404, b'', 'text/plain')

    def chat(self, body, bad):
        self.server.prompts.append(body['messages'][0]['content'])
        self.server.sampled = {k: v for k, v in body.items() if k != 'messages'}
        content = ('I cannot answer' if bad else
                   '```json\n{"rational": "r", "evidence": "opened in March 1889", '
                   '"summary": "The tower opened in 1889."}\n```')
        self.reply(body=json.dumps({'choices': [{'message': {'role': 'assistant', 'content': content}}]}).encode(),
                   ctype='application/json')

class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    def handle_error(self, request, client_address):
        "A client that hung up (the timeout and cap tests do) is not an error"
        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            super().handle_error(request, client_address)

def _serve():
    srv = Server(('127.0.0.1', 0), Handler)
    srv.hits, srv.sent, srv.lock, srv.inflight, srv.peak, srv.prompts = Counter(), 0, threading.Lock(), 0, 0, []
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    srv.base = f'http://127.0.0.1:{srv.server_port}'
    yield srv
    srv.shutdown()
    srv.server_close()

@pytest.fixture(scope='module')
def server(): yield from _serve()

@pytest.fixture(scope='module')
def other():
    "A second loopback server, on another port"
    yield from _serve()

def cfg(**kw): return ToolConfig(**{'allow_hosts': ('127.0.0.1',), 'backoff': 0.01, 'request_timeout': 5, **kw})

# --- retries, Retry-After, timeouts ---

def test_500s_then_success_is_retried(server):
    obs = run(web_visit(f'{server.base}/flaky', 'When did the tower open?', cfg(retries=3)))
    assert 'opened in March 1889' in obs and server.hits['/flaky'] == 3

def test_5xx_retries_are_bounded(server):
    obs = run(web_visit(f'{server.base}/down', 'g', cfg(retries=2)))
    assert obs == f'[visit error] {server.base}/down: HTTP 503' and server.hits['/down'] == 3

def test_429_honours_retry_after(server):
    t0 = time.perf_counter()
    obs = run(web_visit(f'{server.base}/limited', 'g', cfg(retries=1)))
    assert 'finally' in obs and time.perf_counter() - t0 >= 1.0 and server.hits['/limited'] == 2

def test_slow_response_times_out(server):
    t0 = time.perf_counter()
    obs = run(web_visit(f'{server.base}/slow', 'g', cfg(request_timeout=0.3, retries=1)))
    assert (obs == f'[visit error] {server.base}/slow: timed out after 0.3 s (2 tries)'
            and time.perf_counter() - t0 < 2.5)

def test_each_page_has_the_budget_and_a_slow_one_costs_only_itself(server):
    obs = run(web_visit(f'{server.base}/slow', 'g', cfg(timeout=0.4, request_timeout=10)))
    assert obs == f'[visit error] {server.base}/slow: timed out after 0.4 s'
    from venus_nb.web import Page
    class Reader:
        async def read(self, url):
            if 'slow' in url: await asyncio.sleep(5)
            return Page(url, 'T', 'The Rhine flows through Kestra.')
    tb = Toolbox(None, Reader(), cfg=ToolConfig(timeout=0.3))
    both = run(tb.run(ToolCall('visit', {'url': ['https://a.test/slow', 'https://b.test/ok'], 'goal': 'river'})))
    slow, ok = both.split(S.PAGE_SEPARATOR)
    assert slow == '[visit error] https://a.test/slow: timed out after 0.3 s' and 'Rhine' in ok

# --- caps and content types ---

def test_50mb_page_is_capped(server):
    c = cfg(max_bytes=1_000_000)
    async def go():
        async with make_client(c) as client: return await fetch_page(f'{server.base}/huge', c, client)
    server.sent = 0
    f = run(go())
    for _ in range(100):   # the handler notices the closed connection and records what it sent
        if server.sent: break
        time.sleep(0.05)
    assert f.truncated and len(f.body) == 1_000_000 and 1_000_000 <= server.sent < HUGE // 2
    obs = run(web_visit(f'{server.base}/huge', 'filler',
                        cfg(max_bytes=200_000, max_chars=20_000, evidence_chars=1_000)))
    parsed = S.parse_visit_observation(obs)
    assert parsed and len(parsed['evidence']) <= 1_000 and len(obs) < 3_000

def test_page_text_cap(server):
    async def go():
        async with Toolbox.web(cfg(max_bytes=100_000, max_chars=5_000)) as tb:
            return await tb.page(f'{server.base}/huge')
    page = run(go())
    assert page.truncated and len(page.text) == 5_000

@pytest.mark.parametrize('path,expect', [('/text', 'plain text: the tower opened in 1889'), ('/json', '"opened": 1889'),
                                         ('/untyped', 'no type but plain words'), ('/latin1', 'café au lait'),
                                         ('/png', 'content type image/png is not text'),
                                         ('/pdf', 'content type application/pdf is not text'),
                                         ('/untyped-bin', 'content type application/octet-stream is not text'),
                                         ('/nowhere', 'HTTP 404')])
def test_content_types(server, path, expect):
    assert expect in run(web_visit(f'{server.base}{path}', 'what does it say', cfg()))

# --- redirects ---

def test_redirect_chain_to_loopback_is_refused(server):
    "Start on `localhost` (allowed by name); the chain ends at 127.0.0.1, which is not allowed"
    server.hits.clear()
    url = f'http://localhost:{server.server_port}/r1'
    obs = run(web_visit(url, 'g', ToolConfig(allow_hosts=['localhost'], retries=0)))
    assert obs == f'[visit error] {url}: redirect to {server.base}/page refused: 127.0.0.1 is a loopback address'
    assert server.hits['/r3'] == 1 and server.hits['/page'] == 0
    assert 'opened in March 1889' in run(web_visit(url, 'g', ToolConfig(allow_hosts=['localhost', '127.0.0.1'])))

def test_redirects_to_private_or_file_are_refused(server, no_connections):
    for path, why in [('/to-private', '10.0.0.1 is a private address'), ('/to-file', "scheme 'file' is not allowed")]:
        assert why in run(web_visit(f'{server.base}{path}', 'g', cfg()))
    assert no_connections == []   # only the loopback server was contacted

def test_allow_hosts_port_is_checked_on_redirects(server, other):
    "An entry `host:port` admits that port only: the allowed server's redirect to another loopback port is refused"
    server.other, url = f'{other.base}/page', f'{server.base}/to-port'
    other.hits.clear()
    only = ToolConfig(allow_hosts=[f'127.0.0.1:{server.server_port}'], retries=0)
    assert (run(web_visit(url, 'g', only))
            == f'[visit error] {url}: redirect to {other.base}/page refused: 127.0.0.1 is a loopback address')
    assert other.hits['/page'] == 0
    both = ToolConfig(allow_hosts=[f'127.0.0.1:{server.server_port}', f'127.0.0.1:{other.server_port}'])
    assert 'opened in March 1889' in run(web_visit(url, 'g', both)) and other.hits['/page'] == 1
    assert 'opened in March 1889' in run(web_visit(url, 'g', cfg()))   # a bare host admits any port, as documented
    assert (ToolConfig(allow_hosts=['LocalHost:80', '[::1]:8000', '[::1]', 'Example.org']).allow_hosts
            == ('localhost:80', '[::1]:8000', '::1', 'example.org'))
    for bad in ('127.0.0.1:0', '127.0.0.1:65536', 'localhost:'):
        with pytest.raises(ValueError, match='allow_hosts'): ToolConfig(allow_hosts=[bad])

def test_redirect_loop_is_bounded(server):
    assert run(web_visit(f'{server.base}/loop', 'g', cfg(max_redirects=3))).endswith('too many redirects (more than 3)')

# --- SSRF table ---

@pytest.fixture
def no_connections(monkeypatch):
    "Every Python socket connect to anything but 127.0.0.1 is recorded and fails"
    seen, real = [], socket.socket.connect
    def guard(sock, addr, *a):
        if addr[0] != '127.0.0.1':
            seen.append(addr)
            raise OSError(f'test forbids connecting to {addr}')
        return real(sock, addr, *a)
    monkeypatch.setattr(socket.socket, 'connect', guard)
    monkeypatch.setattr(socket.socket, 'connect_ex', lambda sock, addr: seen.append(addr) or 111)
    return seen

SSRF = [('http://127.0.0.1/', 'refused: 127.0.0.1 is a loopback address'),
        ('http://localhost/', 'refused: localhost resolves to 127.0.0.1, a loopback address'),
        ('http://[::1]/', 'refused: ::1 is a loopback address'),
        ('http://10.0.0.1/', 'refused: 10.0.0.1 is a private address'),
        ('http://169.254.169.254/latest/meta-data/', 'refused: 169.254.169.254 is a link-local address'),
        ('http://0x7f000001/', 'refused: 0x7f000001 resolves to 127.0.0.1, a loopback address'),
        ('http://2130706433/', 'refused: 2130706433 resolves to 127.0.0.1, a loopback address'),
        ('http://[::ffff:127.0.0.1]/', 'refused: ::ffff:127.0.0.1 is a loopback address'),
        ('http://0.0.0.0:8000/', 'refused: 0.0.0.0 is an unspecified address'),
        ('http://192.168.1.1/', 'refused: 192.168.1.1 is a private address'),
        ('http://100.64.0.1/', 'refused: 100.64.0.1 is not a globally routable address'),
        ('http://[fe80::1]/', 'refused: fe80::1 is a link-local address'),
        ('https://127.0.0.1:8443/', 'refused: 127.0.0.1 is a loopback address'),
        ('file:///etc/passwd', "refused: scheme 'file' is not allowed (only http and https)"),
        ('gopher://example.org:70/1', "refused: scheme 'gopher' is not allowed (only http and https)"),
        ('ftp://example.org/x', "refused: scheme 'ftp' is not allowed (only http and https)"),
        ('http:///nohost', 'refused: the URL has no host')]

@pytest.mark.parametrize('url,reason', SSRF, ids=[u for u, _ in SSRF])
def test_ssrf_refused_without_connecting(url, reason, no_connections):
    sent = []
    client = httpx.AsyncClient(
        transport=httpx.MockTransport(lambda r: sent.append(r) or httpx.Response(200, text='leak')))
    assert run(web_visit(url, 'read it', ToolConfig(), client)) == f'[visit error] {url}: {reason}'
    # the real client, sockets guarded
    assert run(web_visit(url, 'read it', ToolConfig())) == f'[visit error] {url}: {reason}'
    assert sent == [] and no_connections == []

@pytest.mark.parametrize('url', [None, 3, '', '   ', 'x' * 5000, 'http://[bad', ['http://127.0.0.1/', 7]])
def test_bad_urls_are_observations(url):
    obs = run(web_visit(url, 'g', ToolConfig()))
    assert obs.startswith('[visit error]'), obs

def test_names_are_checked_after_dns_and_pinned(monkeypatch, no_connections):
    "A name that resolves to a private address is refused; a public one is connected to at the checked address"
    async def fake_resolve(host, port, timeout=10.0):
        return {'intranet.test': ['10.1.2.3'], 'mixed.test': ['93.184.215.14', '10.0.0.5']}.get(host, ['93.184.215.14'])
    monkeypatch.setattr(W, 'resolve_host', fake_resolve)   # where safe_address looks it up
    sent = []
    def handler(r):
        sent.append(r)
        return httpx.Response(200, text='public words', headers={'content-type': 'text/plain'})
    client = lambda: httpx.AsyncClient(transport=httpx.MockTransport(handler))
    assert run(web_visit('http://intranet.test/x', 'g', ToolConfig(), client())).endswith(
        'refused: intranet.test resolves to 10.1.2.3, a private address')
    obs = run(web_visit('http://mixed.test/', 'g', ToolConfig(), client()))
    assert 'refused: mixed.test resolves to 10.0.0.5' in obs
    assert 'public words' in run(web_visit('https://public.test:8443/a?b=1', 'g', ToolConfig(), client()))
    (r,) = sent
    assert ((r.url.host, r.url.port, r.headers['host'], r.extensions['sni_hostname'])
            == ('93.184.215.14', 8443, 'public.test:8443', 'public.test'))

# --- search backends, summariser, concurrency, cache, record/replay ---

def test_searxng_backend_and_concurrency_limit(server):
    server.peak = 0
    c = cfg(search_api='searxng', search_url=f'{server.base}/search', concurrency=2, top_k=5)
    obs = run(web_search([f'q{i}' for i in range(6)], c))
    res = json.loads(obs)
    assert ([r['query'] for r in res] == [f'q{i}' for i in range(6)]
            and all(len(r['web_page_info_list']) == 5 for r in res))
    assert res[0]['web_page_info_list'][0] == {'title': 'q0 result 0', 'url': 'https://example.org/0',
                                               'snippet': 'about q0'}
    assert server.peak <= 2

def test_serper_backend(server, monkeypatch):
    c = cfg(search_url=f'{server.base}/serper', top_k=4)
    monkeypatch.delenv('SERPER_API_KEY', raising=False)
    assert run(web_search('tower', c)) == "[search error] 'tower': no search API key: set $SERPER_API_KEY"
    monkeypatch.setenv('SERPER_API_KEY', 'wrong')
    assert run(web_search('tower', c)) == "[search error] 'tower': the search API answered HTTP 403"
    monkeypatch.setenv('SERPER_API_KEY', 'k123')
    res = json.loads(run(web_search(['tower', 'paris'], c)))
    assert [h['title'] for h in res[1]['web_page_info_list']] == [f'paris {i}' for i in range(4)]
    run(web_search('埃菲尔铁塔 高度', c))   # searched from where DR-Venus' tool searches a Chinese query
    assert server.located == {'埃菲尔铁塔 高度': ('China', 'cn', 'zh-cn')}
    run(web_search('Eiffel tower', c))
    assert server.located == {'Eiffel tower': ('United States', 'us', 'en')}

def test_openai_summariser(server):
    obs = run(web_visit(f'{server.base}/page', 'When did it open?', cfg(summary_url=f'{server.base}/v1')))
    assert obs == (f'The useful information in {server.base}/page for user goal When did it open? as follows: \n\n'
                   'Evidence in page: \nopened in March 1889\n\nSummary: \nThe tower opened in 1889.')
    assert ('The Eiffel Tower opened in March 1889' in server.prompts[-1]
            and '## **User Goal**\nWhen did it open?' in server.prompts[-1])
    assert server.sampled == {'model': 'Qwen3-30B-A3B-Instruct-2507', 'temperature': 0.7}   # DR-Venus' summariser
    run(web_visit(f'{server.base}/page', 'g', cfg(summary_url=f'{server.base}/v1', summary_temperature=None)))
    assert server.sampled == {'model': 'Qwen3-30B-A3B-Instruct-2507'}   # the server's own default
    with pytest.raises(ValueError, match='summary_temperature must be >= 0'): cfg(summary_temperature=-1)
    n = server.hits['/bad/v1/chat/completions']
    assert run(web_visit(f'{server.base}/page', 'g', cfg(summary_url=f'{server.base}/bad/v1'))).endswith(
        'the summariser gave no JSON with "evidence" and "summary" (3 tries)')
    assert server.hits['/bad/v1/chat/completions'] == n + 3

def test_any_chat_model_summarises(server):
    async def policy(messages): return '{"evidence": "330 metres", "summary": "It is 330 m tall."}'
    async def go():
        async with Toolbox.web(cfg(), chat=policy) as tb:
            return await tb.run(ToolCall('visit', {'url': f'{server.base}/page', 'goal': 'height'}))
    assert run(go()).endswith('Evidence in page: \n330 metres\n\nSummary: \nIt is 330 m tall.')

def test_cache_makes_reruns_reproducible(server, tmp_path):
    c = cfg(search_api='searxng', search_url=f'{server.base}/search', cache_path=str(tmp_path/'cache.sqlite'))
    before = server.hits['/search']
    first = run(web_search('cached query', c))
    again = [run(web_search('cached query', c)), run(web_visit(f'{server.base}/page', 'g', c)),
             run(web_visit(f'{server.base}/page', 'g', c))]
    assert again[0] == first and again[1] == again[2] and server.hits['/search'] == before + 1
    assert len(W.Cache(c.cache_path)) == 2

def test_unusable_cache_path_is_a_clear_error(tmp_path):
    "A path sqlite cannot open at all (here a folder) is an error; a damaged file is set aside (test_web.py)"
    (p := tmp_path/'cache.sqlite').mkdir()
    with pytest.raises(ValueError, match='cannot use .* as a tool cache'):
        Toolbox(None, cfg=ToolConfig(cache_path=str(p)))

def test_record_then_replay_offline(server, tmp_path):
    tape, c = tmp_path/'tape.jsonl', cfg(search_api='searxng', search_url=f'{server.base}/search')
    calls = [ToolCall('search', {'query': ['tower']}),
             ToolCall('visit', {'url': f'{server.base}/flaky', 'goal': 'When did it open?'})]
    server.hits['/flaky'] = 0
    async def go(transport):
        async with Toolbox.web(c, make_client(c, transport)) as tb:
            return [await run_tool(k, tb) for k in calls]
    recorded = run(go(Cassette(tape, inner=httpx.AsyncHTTPTransport())))
    hits = sum(server.hits.values())
    replayed = run(go(Cassette(tape)))
    assert replayed == recorded and sum(server.hits.values()) == hits and 'opened in March 1889' in recorded[1]
    assert len(tape.read_text().splitlines()) == 4   # one search, two 500s, one 200
    miss = run(run_tool(ToolCall('search', {'query': ['never recorded']}),
                        Toolbox.web(c, make_client(c, Cassette(tape)))))
    assert miss.startswith("[search error] 'never recorded': ReplayMiss: no recorded response for GET http://127.0.0.1")

def test_the_budgets_hold_whatever_the_backend():
    "A searcher that ignores k, or a reader that keeps a long page: the toolbox cuts to top_k and max_chars itself"
    from venus_nb.web import Page
    class Many:
        async def search(self, q, k=10): return [dict(title=str(i), url=f'x/{i}', snippet='') for i in range(50)]
        async def read(self, url): return Page(url, 't', 'x' * 5000)
    got = run(Toolbox(Many(), cfg=ToolConfig(top_k=3)).run(ToolCall('search', {'query': ['q']})))
    assert len(json.loads(got)[0]['web_page_info_list']) == 3
    page = run(Toolbox(Many(), cfg=ToolConfig(max_chars=100)).page('https://x/1'))
    assert (len(page.text), page.truncated) == (100, True)
